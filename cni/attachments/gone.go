package attachments

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// interfaceGone reports whether the interface ifName is proven absent
// from the network namespace at netnsPath, and why: the namespace file is
// gone, or the namespace has no link of that name. Anything it cannot
// prove (the namespace cannot be entered, netlink fails) is not absence.
func interfaceGone(netnsPath, ifName string) (bool, string) {
	if netnsPath == "" {
		return false, ""
	}
	if _, err := os.Stat(netnsPath); errors.Is(err, os.ErrNotExist) {
		return true, fmt.Sprintf("network namespace %s is gone", netnsPath)
	}
	ns, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return false, ""
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return false, ""
	}
	defer h.Close()
	_, err = h.LinkByName(ifName)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return true, fmt.Sprintf("network namespace %s has no interface %s", netnsPath, ifName)
	}
	return false, ""
}
