package ctl

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
)

// devicesOutput is what devices shows, json and yaml as they are.
type devicesOutput struct {
	Devices []deviceView `json:"devices"`
	// UnknownSources are the holder sources that could not be read, with
	// why: a device shown free may be held.
	UnknownSources []string `json:"unknownSources,omitempty"`
}

// deviceView is one device: where the config puts it, its health as the
// agent judges it and its holders.
type deviceView struct {
	Device string `json:"device"`
	// Pool is the full resource name, "" for a device in no pool.
	Pool    string     `json:"pool,omitempty"`
	Mode    pools.Mode `json:"mode,omitempty"`
	Healthy bool       `json:"healthy"`
	Reason  string     `json:"reason,omitempty"`
	// HeldBy names a holder the pool's front end did not hand the device
	// to (a claim in a device plugin pool, a device plugin pod in a DRA
	// pool, a sandbox whose pod is gone): the agent does not offer the
	// device while it holds it.
	HeldBy string `json:"heldBy,omitempty"`
	// Fenced says why a fence withdraws the device from every front end
	// (its PF's VF layout is changing, its pool is switching front end),
	// or that the fences cannot be read.
	Fenced string `json:"fenced,omitempty"`
	// Unknown says, while a source of holders cannot be read, which and
	// why: the device may have holders Holders lacks, and the agent hands
	// it to no one meanwhile.
	Unknown string         `json:"unknown,omitempty"`
	Holders []deviceHolder `json:"holders"`
}

// deviceHolder is one holder of a device. Container is a pod's container
// name (kind pod) or a sandbox's ID (kind container).
type deviceHolder struct {
	Kind      ledger.Kind `json:"kind"`
	Namespace string      `json:"namespace,omitempty"`
	Name      string      `json:"name,omitempty"`
	Container string      `json:"container,omitempty"`
	// Resource is what the device was handed out as, which may differ
	// from its pool after a config change.
	Resource string `json:"resource,omitempty"`
	// Since is zero when the source does not say.
	Since time.Time `json:"since,omitzero"`
}

// devices lists the node's devices, sorted by PCI address: with all every
// function, else the pooled ones and any other something holds, and a
// held device that is no longer on the node. fences is why the fences
// cannot be read, nil when they were.
func (n *pooledNode) devices(held *ledger.Ledger, fences error, all bool) devicesOutput {
	placed := map[string]pooledDevice{}
	for _, p := range n.match.Pools {
		for _, d := range p.Devices {
			placed[d.ID] = pooledDevice{d, p.Resource}
		}
	}
	view := n.healthView(held)
	out := devicesOutput{Devices: []deviceView{}, UnknownSources: held.Unknown}
	onNode := map[string]bool{}
	for _, d := range n.functions() {
		onNode[d.ID] = true
		p, pooled := placed[d.ID]
		if pooled {
			d = p.dev
		}
		if all || pooled || len(held.Holders(d.ID)) > 0 {
			row := deviceRow(view, &d, p.res, held)
			row.Fenced = fenced(held, fences, d.ID, d.PF)
			out.Devices = append(out.Devices, row)
		}
	}
	for _, id := range held.Devices() {
		if !onNode[id] {
			out.Devices = append(out.Devices, deviceView{Device: id, Reason: "not on the node", Fenced: fenced(held, fences, id, ""),
				Unknown: held.UnknownWhy(), Holders: holders(held.Holders(id))})
		}
	}
	slices.SortFunc(out.Devices, func(a, b deviceView) int { return cmp.Compare(a.Device, b.Device) })
	return out
}

// fenced says why a fence withdraws the device whose function's PF is pf
// ("" for no VF), "" for none; with the fences unknown, that.
func fenced(l *ledger.Ledger, fences error, id, pf string) string {
	if fences != nil {
		return "fences unknown: " + fences.Error()
	}
	if f, ok := l.Fenced(id, pf); ok {
		return f.Reason
	}
	return ""
}

// pooledDevice is a device as its pool has it, and the pool's resource.
type pooledDevice struct {
	dev pools.Device
	res pools.Resource
}

// healthView is what the agent judges health from, as far as one look at
// the node sees it: no link events since discovery, netdevs seeded from
// the inventory, and the held devices, none known while a source is
// unknown (then any device may be held: none is judged lost for want of
// a holder).
func (n *pooledNode) healthView(held *ledger.Ledger) devhealth.View {
	v := devhealth.View{Inv: n.inv, Links: devhealth.LinkStates{}, Netdevs: devhealth.NetdevMemory{}, Held: held.Held()}
	v.Netdevs.Seed(n.inv)
	return v
}

// functions are every PF, VF and NIC function as pool devices.
func (n *pooledNode) functions() []pools.Device {
	var out []pools.Device
	for i := range n.inv.PFs {
		pf := &n.inv.PFs[i]
		out = withPorts(out, pools.Device{ID: pf.Address, Function: &pf.Function, VFIndex: -1})
		for j := range pf.VFs {
			vf := &pf.VFs[j]
			out = withPorts(out, pools.Device{ID: vf.Address, Function: &vf.Function, PF: vf.PF, VFIndex: vf.Index})
		}
	}
	for i := range n.inv.NICs {
		nic := &n.inv.NICs[i]
		out = withPorts(out, pools.Device{ID: nic.Address, Function: nic, VFIndex: -1})
	}
	return out
}

// withPorts appends dev or, for a function with several ports (mlx4),
// one device per port, as pools makes them.
func withPorts(out []pools.Device, dev pools.Device) []pools.Device {
	fn := dev.Function
	if len(fn.Ports) == 0 {
		return append(out, dev)
	}
	for i := range fn.Ports {
		out = append(out, dev.OnPort(&fn.Ports[i]))
	}
	return out
}

func deviceRow(v devhealth.View, d *pools.Device, res pools.Resource, held *ledger.Ledger) deviceView {
	row := deviceView{Device: d.ID, Unknown: held.UnknownWhy(), Holders: holders(held.Holders(d.ID))}
	if res.Name != "" {
		row.Pool, row.Mode = res.FullName(), res.Mode
		fe := ledger.FrontEnd{Resource: res.FullName(), DRA: res.Mode == pools.DRA}
		if h, foreign := held.Foreign(d.ID, fe); foreign {
			row.HeldBy = h.String()
		}
	}
	row.Healthy, row.Reason = v.Device(d)
	return row
}

func holders(hs []ledger.Holder) []deviceHolder {
	out := make([]deviceHolder, 0, len(hs))
	for _, h := range hs {
		out = append(out, deviceHolder{Kind: h.Kind, Namespace: h.Namespace, Name: h.Name, Container: h.Container,
			Resource: h.Resource, Since: h.Since})
	}
	return out
}

type devicesRenderer func(io.Writer, devicesOutput) error

func deviceRenderers() map[string]devicesRenderer {
	return map[string]devicesRenderer{
		"table": renderDevicesTable,
		"json": func(w io.Writer, v devicesOutput) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		},
		"yaml": func(w io.Writer, v devicesOutput) error {
			data, err := yaml.Marshal(v)
			if err != nil {
				return err
			}
			_, err = w.Write(data)
			return err
		},
	}
}

// renderDevicesTable writes one row per device. FENCED is why a fence
// withdraws it. HOLDER ends with the sources that cannot be read, by name
// (stderr says why): a device may have holders they would list. SINCE is
// when its first hold began, in UTC: a time the sources all give, to the
// second.
func renderDevicesTable(w io.Writer, v devicesOutput) error {
	unknown := make([]string, 0, len(v.UnknownSources))
	for _, u := range v.UnknownSources {
		name, _, _ := strings.Cut(u, ": ")
		if !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tPOOL\tMODE\tHEALTH\tFENCED\tHOLDER\tSINCE")
	for _, d := range v.Devices {
		health := "healthy"
		switch {
		case !d.Healthy:
			health = "unhealthy: " + d.Reason
		case d.HeldBy != "":
			health = "not offered: held by " + d.HeldBy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Device, dash(d.Pool), dash(string(d.Mode)), health, dash(d.Fenced),
			holderNames(d, unknown), since(d.Holders))
	}
	return tw.Flush()
}

// holderNames names the device's holders as an operator reads them, a
// pod's resource only when it is not the device's pool, then "unknown:"
// and the sources that cannot be read, if any.
func holderNames(d deviceView, unknown []string) string {
	names := make([]string, 0, len(d.Holders)+1)
	for _, h := range d.Holders {
		var name string
		switch h.Kind {
		case ledger.Pod:
			name = fmt.Sprintf("pod %s/%s (%s)", h.Namespace, h.Name, h.Container)
			if h.Resource != d.Pool {
				name = fmt.Sprintf("pod %s/%s (%s, as %s)", h.Namespace, h.Name, h.Container, h.Resource)
			}
		default:
			name = ledger.Holder{Kind: h.Kind, Namespace: h.Namespace, Name: h.Name, Container: h.Container}.String()
		}
		names = append(names, name)
	}
	if d.Unknown != "" && len(unknown) > 0 {
		names = append(names, "unknown: "+strings.Join(unknown, ", "))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "; ")
}

// since is the earliest start of the holds, "-" for none known.
func since(hs []deviceHolder) string {
	var first time.Time
	for _, h := range hs {
		if !h.Since.IsZero() && (first.IsZero() || h.Since.Before(first)) {
			first = h.Since
		}
	}
	if first.IsZero() {
		return "-"
	}
	return first.UTC().Format(time.RFC3339)
}
