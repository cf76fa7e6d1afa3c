package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/cni/netconf"
)

// supportsLifecycle tells whether a list's version has STATUS and GC (CNI
// 1.1.0); libcni treats an unparsable version as too old, and so does this.
func supportsLifecycle(list *netconf.Delegate) bool {
	ok, _ := version.GreaterThanOrEqualTo(list.CNIVersion, "1.1.0")
	return ok
}

// Status runs STATUS (CNI 1.1 section "STATUS") for every plugin of list
// in order; the first that fails stops it, as libcni does, so the error is
// that plugin's. Lists older than 1.1.0 have no STATUS: nil.
func (c *Chain) Status(ctx context.Context, list *netconf.Delegate) error {
	if !supportsLifecycle(list) {
		return nil
	}
	env := c.env("STATUS", Runtime{})
	for _, p := range list.Plugins {
		path, stdin, err := c.prepare(list, p, nil, Runtime{})
		if err == nil {
			_, err = c.exec.ExecPlugin(ctx, path, stdin, env)
		}
		if err != nil {
			return fmt.Errorf("plugin type=%q failed (status): %w", p.Type, err)
		}
	}
	return nil
}

// GC runs GC (CNI 1.1 section "GC") for every plugin of list, each told
// the attachments still valid, unless the list disables it. Every plugin
// runs whatever the others answer; the error joins their failures. libcni
// first deletes the attachments its result cache holds that are not
// valid: hwnet keeps its own records instead, which the caller collects.
func (c *Chain) GC(ctx context.Context, list *netconf.Delegate, valid []types.GCAttachment) error {
	if list.DisableGC || !supportsLifecycle(list) {
		return nil
	}
	attachments, err := json.Marshal(valid)
	if err != nil {
		return err
	}
	env := c.env("GC", Runtime{})
	var errs []error
	for _, p := range list.Plugins {
		if err := c.gcOne(ctx, list, p, attachments, env); err != nil {
			errs = append(errs, fmt.Errorf("plugin type=%q failed (gc): %w", p.Type, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Chain) gcOne(ctx context.Context, list *netconf.Delegate, p netconf.Plugin, attachments json.RawMessage, env []string) error {
	path, err := c.exec.FindInPath(p.Type, c.path)
	if err != nil {
		return err
	}
	fields, err := listFields(list, p, 2)
	if err != nil {
		return err
	}
	fields["cni.dev/valid-attachments"] = attachments
	// The spec's first text named the key cni.dev/attachments
	// (containernetworking/cni#1101); plugins of that time read it.
	fields["cni.dev/attachments"] = attachments
	stdin, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	_, err = c.exec.ExecPlugin(ctx, path, stdin, env)
	return err
}
