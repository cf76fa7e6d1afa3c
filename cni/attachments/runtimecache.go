package attachments

import (
	"context"
	"errors"
	"fmt"
	"os"

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
// network's IPAM lease would stay for good.
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
