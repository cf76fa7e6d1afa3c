package status

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// FromResult returns the status map of the attachment named name whose ADD
// ran with CNI_IFNAME ifName and returned res. A nil res, which ADD may
// return, gives the minimal map of 5.1.1: name and interface.
//
// For a result of 0.3.0 or later, interface and mac are those of the first
// interface with a sandbox and ips those of the addresses whose interface
// index points at it (5.3.2.1, 5.3.3.1 rule 1, 5.3.4.1). Without such an
// interface, ips are the addresses with no or a negative interface index
// (5.3.3.1 rule 2) and interface is ifName, the name CNI made the plugin
// give the pod's interface. For an older result, ips are ip4 and ip6,
// interface is ifName and mac is left out (5.3.2.1, 5.3.4.1).
func FromResult(name string, res types.Result, ifName string) (NetworkStatus, error) {
	st := NetworkStatus{Name: name, Interface: ifName}
	if res == nil {
		return st, nil
	}
	r, err := current(res)
	if err != nil {
		return NetworkStatus{}, fmt.Errorf("status of %q: %w", name, err)
	}
	att := attachmentOf(r)
	if att.iface != nil {
		st.MAC = att.iface.Mac
		if att.iface.Name != "" {
			st.Interface = att.iface.Name
		}
	}
	for _, ip := range att.ips {
		st.IPs = append(st.IPs, ip.Address.String())
	}
	st.DNS = dnsOf(r.DNS)
	return st, nil
}

// Gateways returns the gateways of the attachment's default routes
// (0.0.0.0/0 and ::/0) in result order without repeats: what the delegating
// plugin reports as "default-route" (5.3.6.4, 5.4). A default route without
// a gateway takes the gateway of the attachment's address of its family, as
// plugins do. A result with no default route gives the gateways of the
// attachment's addresses (the same addresses FromResult reports), which are
// where the attachment would route by default. ifName is the CNI_IFNAME the
// ADD ran with.
func Gateways(res types.Result, ifName string) ([]string, error) {
	if res == nil {
		return nil, nil
	}
	r, err := current(res)
	if err != nil {
		return nil, fmt.Errorf("default-route of interface %q: %w", ifName, err)
	}
	att := attachmentOf(r)
	var gws gatewayList
	sawDefault := false
	for _, rt := range r.Routes {
		if !isDefault(rt.Dst) {
			continue
		}
		sawDefault = true
		gw := rt.GW
		if gw == nil {
			gw = att.gatewayOfFamily(rt.Dst.IP)
		}
		gws.add(gw)
	}
	if !sawDefault {
		for _, ip := range att.ips {
			gws.add(ip.Gateway)
		}
	}
	return gws, nil
}

// attachment is the part of a result that describes the pod's interface.
type attachment struct {
	// iface is the first sandbox interface, nil when there is none.
	iface *types100.Interface
	ips   []*types100.IPConfig
}

// attachmentOf picks the pod's interface and its addresses out of r. A
// result older than 0.3.0 has no interfaces, and its ip4 and ip6 no
// interface index, so rule 2 of 5.3.3.1 takes both.
func attachmentOf(r *types100.Result) attachment {
	sandbox := slices.IndexFunc(r.Interfaces, func(i *types100.Interface) bool {
		return i.Sandbox != ""
	})
	var att attachment
	if sandbox >= 0 {
		att.iface = r.Interfaces[sandbox]
	}
	for _, ip := range r.IPs {
		if belongs(ip.Interface, sandbox) {
			att.ips = append(att.ips, ip)
		}
	}
	return att
}

// belongs reports whether an address with interface index index is the
// pod's: one on the sandbox interface (5.3.3.1 rule 1) or, when there is no
// sandbox interface, one not bound to any interface (rule 2).
func belongs(index *int, sandbox int) bool {
	if sandbox >= 0 {
		return index != nil && *index == sandbox
	}
	return index == nil || *index < 0
}

// gatewayOfFamily returns the first gateway of the attachment's addresses
// of ip's family, or nil.
func (att attachment) gatewayOfFamily(ip net.IP) net.IP {
	for _, c := range att.ips {
		if c.Gateway != nil && (c.Gateway.To4() == nil) == (ip.To4() == nil) {
			return c.Gateway
		}
	}
	return nil
}

func isDefault(dst net.IPNet) bool {
	ones, bits := dst.Mask.Size()
	return dst.IP != nil && bits != 0 && ones == 0
}

// gatewayList collects gateways in order without repeats.
type gatewayList []string

func (g *gatewayList) add(gw net.IP) {
	if gw == nil {
		return
	}
	if s := gw.String(); !slices.Contains(*g, s) {
		*g = append(*g, s)
	}
}

func dnsOf(d types.DNS) *DNS {
	if len(d.Nameservers) == 0 && d.Domain == "" && len(d.Search) == 0 {
		return nil
	}
	return &DNS{Nameservers: slices.Clone(d.Nameservers), Domain: d.Domain, Search: slices.Clone(d.Search)}
}

// current returns res as a 1.x result. An ips element without an address
// is an error.
func current(res types.Result) (*types100.Result, error) {
	r, err := asCurrent(res)
	if err != nil {
		return nil, err
	}
	for i, ip := range r.IPs {
		if ip.Address.IP == nil {
			return nil, fmt.Errorf("CNI result %s: ips[%d].address is missing", res.Version(), i)
		}
	}
	return r, nil
}

// asCurrent converts res to a 1.x result. libcni's converters assert the
// concrete type a version implies and dereference every list element, so
// what they would panic on is an error here.
func asCurrent(res types.Result) (*types100.Result, error) {
	var err error
	switch r := res.(type) {
	case *types100.Result:
		if err := nulls(r.CNIVersion, r.Interfaces, r.IPs, r.Routes); err != nil {
			return nil, err
		}
		return r, nil
	case *types040.Result:
		err = errors.Join(convertible(r.CNIVersion, "0.3.0", "0.3.1", "0.4.0"),
			nulls(r.CNIVersion, r.Interfaces, r.IPs, r.Routes))
	case *types020.Result:
		err = convertible(r.CNIVersion, "0.1.0", "0.2.0")
	default:
		err = fmt.Errorf("unsupported CNI result type %T, version %q", res, res.Version())
	}
	if err != nil {
		return nil, err
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("convert CNI result %s: %w", res.Version(), err)
	}
	return r, nil
}

func convertible(version string, versions ...string) error {
	if !slices.Contains(versions, version) {
		return fmt.Errorf("CNI result cniVersion %q is none of %v its type implements", version, versions)
	}
	return nil
}

// nulls reports the null elements of a result's lists, which JSON allows
// and CNI does not.
func nulls[I, P any](version string, interfaces []*I, ips []*P, routes []*types.Route) error {
	return errors.Join(null(version, "interfaces", interfaces), null(version, "ips", ips), null(version, "routes", routes))
}

func null[T any](version, field string, list []*T) error {
	if i := slices.Index(list, nil); i >= 0 {
		return fmt.Errorf("CNI result %s: %s[%d] is null", version, field, i)
	}
	return nil
}
