package attachments

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/cnicache"
	"github.com/hwnet-io/hwnet/cni/chain"
)

// DeleteRuntimeCached is the DEL of a container hwnet keeps no record of
// but the runtime attached to network (the default network) itself, before
// hwnet's configuration was on the node: hwnet installed on a running
// node, or its configuration withheld a while. The runtime's DEL now comes
// through hwnet; without this the network's IPAM lease stays for good. It
// runs from the entry the runtime's libcni cached of that ADD in dir (its
// configuration, arguments and result, as libcni's own DEL would) and
// removes the entry after, as libcni does. No entry: nothing to delete,
// and it says false; so with an entry it cannot read, which goes to warn
// instead of failing the DEL at every retry, the pod Terminating for good.
func DeleteRuntimeCached(ctx context.Context, ch *chain.Chain, dir, network string, rt chain.Runtime, warn func(error)) (bool, error) {
	path, err := cnicache.Path(dir, network, rt.ContainerID, rt.IfName)
	if err != nil {
		return false, err
	}
	entry, err := cnicache.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err == nil {
		err = entry.Matches(network, rt.ContainerID, rt.IfName)
	}
	if err != nil {
		warn(fmt.Errorf("network %s the runtime may have attached before hwnet not deleted: %w", network, err))
		return false, nil
	}
	rec := &attachment.Record{ContainerID: rt.ContainerID, Netns: rt.Netns, Attachments: []attachment.Attachment{{
		Network: network, IfName: rt.IfName, Default: true, ConfList: entry.Config,
		Args: entry.CNIArgs, CapabilityArgs: entry.CapabilityArgs, Result: entry.Result}}}
	if err := DeleteAll(ctx, ch, rec, warn); err != nil {
		return true, fmt.Errorf("DEL of network %s the runtime attached before hwnet, from %s: %w", network, path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("libcni cache entry: %w", err)
	}
	return true, nil
}
