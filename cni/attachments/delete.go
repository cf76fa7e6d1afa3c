package attachments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// Runtime is what the attachment's delegate was given besides its
// configuration.
func Runtime(r *attachment.Record, a attachment.Attachment) chain.Runtime {
	return chain.Runtime{ContainerID: r.ContainerID, Netns: r.Netns, IfName: a.IfName,
		Args: a.Args, CapabilityArgs: a.CapabilityArgs}
}

// Delegate parses the configuration list the attachment ran with.
func Delegate(a attachment.Attachment) (*netconf.Delegate, error) {
	dl, err := netconf.Parse(a.ConfList, "", "")
	if err != nil {
		return nil, fmt.Errorf("network %s interface %s: %w", a.Network, a.IfName, err)
	}
	return dl, nil
}

// Doubtful says why DEL cannot be trusted to run from the record as it
// stands, nil when it can: a format newer than this hwnet writes (after a
// rollback), whose fields it may misread, or an attachment whose
// configuration list does not parse (an empty plugin type). Such a record
// fails its DEL at every retry, the pod Terminating for good: its teardown
// takes the best-effort path an unreadable record takes.
func Doubtful(rec *attachment.Record) error {
	var errs []error
	if rec.Version > attachment.Version {
		errs = append(errs, fmt.Errorf("attachment record of format version %d, newer than the %d this hwnet writes", rec.Version, attachment.Version))
	}
	for _, a := range rec.Attachments {
		if _, err := Delegate(a); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeleteAll runs DEL for every attachment in reverse order. A failure does
// not stop the rest (NPWG 7.2); the returned error lists every failure.
// Device-info files of attachments whose DEL succeeded are removed.
//
// A delegate plugin missing from the plugin path does not fail the DEL,
// nor does a DEL whose interface is proven gone (see delAlreadyGone): the
// attachment is passed to warn and counts as deleted. So is what the
// record's decoding left out (Record.Skipped): a record of a newer hwnet
// or of an odd shape still tears down what it can. Otherwise a pod
// whose ADD failed that way could never be torn down, its sandbox's DEL
// failing for the same reason at every retry.
func DeleteAll(ctx context.Context, ch *chain.Chain, rec *attachment.Record, warn func(error)) error {
	for _, skipped := range rec.Skipped {
		warn(fmt.Errorf("attachment record: %s; what that named is not undone", skipped))
	}
	var errs []error
	for i := len(rec.Attachments) - 1; i >= 0; i-- {
		if err := deleteOne(ctx, ch, rec, rec.Attachments[i], warn); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func deleteOne(ctx context.Context, ch *chain.Chain, rec *attachment.Record, a attachment.Attachment, warn func(error)) error {
	dl, err := Delegate(a)
	if err != nil {
		return err
	}
	rt := Runtime(rec, a)
	err = ch.Del(ctx, dl, rt, a.AddResult())
	if err != nil {
		err = delAlreadyGone(ctx, ch, dl, rt, a, err, warn)
	}
	var missing *chain.MissingPluginsError
	if errors.As(err, &missing) {
		warn(fmt.Errorf("DEL network %s interface %s: %w; anything those plugins made is left", a.Network, a.IfName, err))
		err = nil
	}
	if err != nil {
		return fmt.Errorf("DEL network %s interface %s: %w", a.Network, a.IfName, err)
	}
	if a.DeviceInfoFile != "" {
		if err := os.Remove(a.DeviceInfoFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("network %s interface %s: device-info: %w", a.Network, a.IfName, err)
		}
	}
	return nil
}

// delAlreadyGone decides a failed DEL whose interface is already gone:
// the container's network namespace no longer exists, or it holds no
// interface of that name (an ADD that failed or was killed before the
// move). Then nothing is left in the container to undo, and DEL runs once
// more without a namespace, the CNI form of "release what you hold
// outside it" (IPAM, devices) that plugins such as host-device and tuning
// honour. Teardown converges instead of failing the same way at every
// retry. Any other failure stands, and so does a plugin the plugin timeout
// killed: a plugin that creates no interface (a meta plugin) finds none
// either way, and run again it would hang as long once more, past
// kubelet's teardown deadline, whose error names neither network nor
// plugin.
func delAlreadyGone(ctx context.Context, ch *chain.Chain, dl *netconf.Delegate, rt chain.Runtime, a attachment.Attachment, cause error, warn func(error)) error {
	if errors.Is(cause, chain.ErrPluginTimeout) {
		return cause
	}
	gone, why := interfaceGone(rt.Netns, rt.IfName)
	if !gone {
		return cause
	}
	rt.Netns = ""
	if err := ch.Del(ctx, dl, rt, a.AddResult()); err != nil {
		return errors.Join(cause, fmt.Errorf("again without the namespace (%s): %w", why, err))
	}
	warn(fmt.Errorf("DEL network %s interface %s: %s, so DEL ran without it: %w", a.Network, a.IfName, why, cause))
	return nil
}

// EncodeCapabilityArgs encodes runtimeConfig values for a record.
func EncodeCapabilityArgs(values map[string]interface{}) (map[string]json.RawMessage, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(values))
	for k, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("runtimeConfig %q: %w", k, err)
		}
		out[k] = raw
	}
	return out, nil
}
