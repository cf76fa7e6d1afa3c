package attachments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/cnicache"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// RuntimeCache is the runtime's libcni cache, read for the DEL of a
// container hwnet keeps no record of though the default network holds it:
//   - the runtime attached it to the default network itself, before
//     hwnet's configuration was on the node (hwnet installed on a running
//     node, or its configuration withheld a while): the cache has the
//     default network's entry;
//   - hwnet attached it, and its record went with an uninstall before
//     hwnet was installed again: the cache has hwnet's own entry.
//
// Its DEL comes through hwnet either way, and without this the default
// network's IPAM lease would stay for good; and the GC keeps what the
// cache holds of a live sandbox (Attachments), or the default network
// would free that lease while the pod runs.
type RuntimeCache struct {
	// Dir is libcni's cache directory.
	Dir string
	// Own is hwnet's network name, the runtime's name for what it attached.
	Own string
	// Default is the default network's current configuration.
	Default *netconf.Delegate
}

// Delete runs the default network's DEL of the container's interface from
// the first entry found: the default network's own, with the configuration,
// arguments and result of its ADD, as libcni's DEL would, and then removes
// it as libcni does; else hwnet's, with the default network's current
// configuration and the result hwnet gave the runtime (the runtime's libcni
// removes that entry once this DEL succeeds). No entry: nothing to delete,
// and it says false; so with an entry it cannot read, which goes to warn
// instead of failing the DEL at every retry, the pod Terminating for good.
func (rc RuntimeCache) Delete(ctx context.Context, ch *chain.Chain, rt chain.Runtime, warn func(error)) (bool, error) {
	path, entry := rc.find(rt, warn)
	if entry == nil {
		return false, nil
	}
	a := attachment.Attachment{Network: rc.Default.Name, IfName: rt.IfName, Default: true, ConfList: entry.Config,
		Args: entry.CNIArgs, CapabilityArgs: entry.CapabilityArgs, Result: entry.Result}
	if entry.NetworkName == rc.Own {
		var err error
		if a.ConfList, err = rc.Default.Bytes(); err != nil {
			return false, err
		}
	}
	rec := &attachment.Record{ContainerID: rt.ContainerID, Netns: rt.Netns, Attachments: []attachment.Attachment{a}}
	if err := DeleteAll(ctx, ch, rec, warn); err != nil {
		return true, fmt.Errorf("DEL of network %s, attached without an hwnet record (libcni cache %s): %w", rc.Default.Name, path, err)
	}
	if entry.NetworkName == rc.Own {
		return true, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("libcni cache entry: %w", err)
	}
	return true, nil
}

// find returns the first of the default network's and hwnet's entries of
// the container's interface that is there and reads.
func (rc RuntimeCache) find(rt chain.Runtime, warn func(error)) (string, *cnicache.Entry) {
	for _, network := range []string{rc.Default.Name, rc.Own} {
		path, err := cnicache.Path(rc.Dir, network, rt.ContainerID, rt.IfName)
		if err != nil {
			warn(err)
			return "", nil
		}
		entry, err := cnicache.Read(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = entry.Matches(network, rt.ContainerID, rt.IfName)
		}
		if err != nil {
			warn(fmt.Errorf("default network not deleted: %w", err))
			return "", nil
		}
		return path, entry
	}
	return "", nil
}

// Cached is an attachment the runtime's libcni cache holds.
type Cached struct {
	Network, ContainerID, IfName string
	// PodNamespace and PodName are the pod its ADD was for (CNI_ARGS
	// K8S_POD_NAMESPACE and K8S_POD_NAME), when given.
	PodNamespace, PodName string
	// Written is when libcni wrote the entry, at the end of its ADD.
	Written time.Time
}

// Attachments lists the cache's entries of the default network and of
// hwnet: those the default network may hold a lease for, whether hwnet
// keeps a record of them or not. An entry whose file name claims either
// network but that cannot be read is an error: whose lease it stands for
// is unknown.
func (rc RuntimeCache) Attachments() ([]Cached, error) {
	all, err := ReadRuntimeCache(rc.Dir, rc.claims)
	var out []Cached
	for _, c := range all {
		if c.Network == rc.Default.Name || c.Network == rc.Own {
			out = append(out, c)
		}
	}
	return out, err
}

// claims says whether a file name may be an entry of the default network
// or of hwnet (libcni names it network-containerID-ifName).
func (rc RuntimeCache) claims(name string) bool {
	return strings.HasPrefix(name, rc.Default.Name+"-") || strings.HasPrefix(name, rc.Own+"-")
}

// ReadRuntimeCache reads the entries of the libcni cache at dir whose file
// names match; a directory that does not exist holds none. The entries that
// cannot be read are errors, joined, returned with the others.
func ReadRuntimeCache(dir string, match func(name string) bool) ([]Cached, error) {
	dir = filepath.Join(dir, "results")
	files, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runtime's libcni cache: %w", err)
	}
	var out []Cached
	var errs []error
	for _, f := range files {
		if !match(f.Name()) {
			continue
		}
		c, ok, err := readCached(filepath.Join(dir, f.Name()))
		if ok {
			out = append(out, c)
		}
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// readCached reads the entry at path; ok is false for one removed
// meanwhile (its DEL ran) or that cannot be read.
func readCached(path string) (Cached, bool, error) {
	info, err := os.Stat(path)
	var e *cnicache.Entry
	if err == nil {
		e, err = cnicache.Read(path)
	}
	if errors.Is(err, os.ErrNotExist) {
		return Cached{}, false, nil
	}
	if err != nil {
		return Cached{}, false, err
	}
	c := Cached{Network: e.NetworkName, ContainerID: e.ContainerID, IfName: e.IfName, Written: info.ModTime()}
	for _, kv := range e.CNIArgs {
		switch kv[0] {
		case "K8S_POD_NAMESPACE":
			c.PodNamespace = kv[1]
		case "K8S_POD_NAME":
			c.PodName = kv[1]
		}
	}
	return c, true, nil
}
