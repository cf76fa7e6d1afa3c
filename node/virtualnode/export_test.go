package virtualnode

import (
	"fmt"
	"log/slog"

	"github.com/vishvananda/netns"
)

// The internals the external tests check directly.
const (
	ArphrdEther      = arphrdEther
	ArphrdInfiniBand = arphrdInfiniBand
	ClassEthernet    = classEthernet
	ClassInfiniBand  = classInfiniBand
)

type RoutingID = routingID

var (
	DeleteNetns    = deleteNetns
	IsMountPoint   = isMountPoint
	IsUIODriver    = isUIODriver
	NetnsDir       = netnsDir
	ParseRanges    = parseRanges
	ParseRoutingID = parseRoutingID
	Plan           = plan
)

func (r routingID) Addr() string { return r.addr() }

// ResyncNetdevs does what ReturnNetdevs does once link notifications were
// lost.
func (n *Node) ResyncNetdevs(log *slog.Logger) error {
	ns, err := netns.GetFromName(n.st.Netns)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", n.st.Netns, err)
	}
	defer ns.Close()
	r, err := n.newReturner(ns, log)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.resync()
}
