package crinet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/hwnet-io/hwnet/api/attachment"
	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/status"
)

// fallbackNetwork is the attachment network name records give the
// runtime's default network, which is not namespaced.
const fallbackNetwork = "\x00fallback"

// attachmentsByNetwork reads hwnet's attachment records: the pods attached
// to each network on this node, keyed by status name ("namespace/name",
// or fallbackNetwork for the default network). Unreadable records are
// reported in the error; the readable ones are still returned.
func attachmentsByNetwork(records *attachments.Store) (map[string][]*crinetapi.PodAttachment, error) {
	ids, err := records.List()
	if err != nil {
		return nil, err
	}
	byNet := map[string][]*crinetapi.PodAttachment{}
	var errs []error
	for _, id := range ids {
		rec, err := records.Load(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since listed
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, a := range rec.Attachments {
			name := a.Network
			if a.Default {
				name = fallbackNetwork
			}
			byNet[name] = append(byNet[name], podAttachment(rec, a))
		}
	}
	return byNet, errors.Join(errs...)
}

// podAttachment is one attachment of a record, with the IPs of its ADD
// result; an attachment whose ADD has not finished has none yet.
func podAttachment(rec *attachment.Record, a attachment.Attachment) *crinetapi.PodAttachment {
	pa := &crinetapi.PodAttachment{
		PodNamespace: rec.PodNamespace, PodName: rec.PodName, PodUid: rec.PodUID,
		ContainerId: rec.ContainerID, InterfaceName: a.IfName,
	}
	st, err := status.FromResult(a.Network, a.AddResult(), a.IfName)
	if err != nil {
		return pa
	}
	pa.InterfaceName = st.Interface
	for _, ip := range st.IPs {
		pa.Ips = append(pa.Ips, &crinetapi.PodIP{Ip: bareIP(ip), NetworkName: a.Network})
	}
	return pa
}

// bareIP drops a prefix length: PodIP.ip is an address.
func bareIP(s string) string {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().String()
	}
	return s
}

// podNames are "namespace/name" of each pod, once each.
func podNames(pods []*crinetapi.PodAttachment) []string {
	seen := map[string]bool{}
	var names []string
	for _, p := range pods {
		n := fmt.Sprintf("%s/%s", p.GetPodNamespace(), p.GetPodName())
		if p.GetPodName() == "" {
			n = "container " + p.GetContainerId()
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}
