package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/test/e2e"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// leftover is what a stack left on a node after its pods and daemons
// were gone: pod network namespaces containerd never tore down (the VFs
// moved into them stay away from the node) and host-local leases whose
// DEL never ran (the default network's range fills up).
type leftover struct {
	netns, leases int
}

func (l leftover) String() string {
	return fmt.Sprintf("%d pod network namespaces, %d host-local leases", l.netns, l.leases)
}

// restoreScript counts, then removes, a node's pod network namespaces
// and host-local leases; it runs once no pod but host-network daemons is
// left, when every one is a leftover. A namespace removed gives its VFs
// back to the node (the virtual node's kernel emulation returns them, as
// the kernel returns a physical function's netdev to the host).
const restoreScript = `set -e
ns=0; leases=0
for f in /var/run/netns/cni-*; do [ -e "$f" ] || continue; ns=$((ns+1)); ip netns delete "$(basename "$f")"; done
for d in /var/lib/cni/networks/*/; do
	[ -d "$d" ] || continue
	for f in "$d"*; do
		case "$(basename "$f")" in lock|last_reserved_ip.*) continue;; esac
		[ -e "$f" ] || continue
		leases=$((leases+1)); rm -f "$f"
	done
done
echo "$ns $leases"`

// restoreNodes removes what the stack just taken down left on the nodes,
// so that the next stack, or round, starts from the same node, and says
// what it found in the table's notes.
func (be *bench) restoreNodes(ctx context.Context, stack string, round int) error {
	for _, n := range be.c.Nodes() {
		left, err := restoreNode(ctx, n)
		if err != nil {
			return fmt.Errorf("restore node %s after %s: %w", n.NodeName(), stack, err)
		}
		if left != (leftover{}) {
			be.tab.note("round %d: %s left %s on node %s; the bench removed them", round, stack, left, n.NodeName())
			fmt.Printf("bench: round %d: %s left %s on node %s; removed\n", round, stack, left, n.NodeName())
		}
	}
	return nil
}

func restoreNode(ctx context.Context, n *cluster.Cluster) (leftover, error) {
	out, err := e2e.Exec(ctx, n, nil, "sh", "-c", restoreScript)
	if err != nil {
		return leftover{}, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return leftover{}, fmt.Errorf("restore script printed %q, want two counts", out)
	}
	var l leftover
	if l.netns, err = strconv.Atoi(f[0]); err == nil {
		l.leases, err = strconv.Atoi(f[1])
	}
	return l, err
}
