package deviceplugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/offer"
)

// DefaultCDIDir is where the runtime reads CDI specs that come and go.
const DefaultCDIDir = handout.DefaultCDIDir

// CDISpecPrefix begins the name of every CDI spec a device plugin writes:
// uninstalling hwnet removes them by it.
const CDISpecPrefix = "hwnet-dp-"

// CDISpecName is the file name of a CDI pool's spec in the CDI directory:
// CDISpecPrefix, the resource name as in SocketName, then ".json".
func CDISpecName(resourceName string) string {
	return CDISpecPrefix + strings.TrimSuffix(SocketName(resourceName), ".sock") + ".json"
}

// cdiSpecOnDisk is, by device ID, the function each device's entry in
// the pool's CDI spec on disk was made from: the discovered function is
// immutable, so the same pointer makes the same entry. A pool without
// CDI has none (nil); one with CDI, an empty one before its first write.
type cdiSpecOnDisk map[string]*discovery.Function

// holds reports whether the spec's entry for d is d's as it is now.
func (c cdiSpecOnDisk) holds(d *offer.State) bool {
	fn, ok := c[d.ID]
	return ok && fn == d.Function
}

// cdiName is the device's fully qualified CDI name: <prefix>/<name>=<ID>,
// so that a container's CDI devices read as its resources do.
func (p *Plugin) cdiName(id string) string {
	return p.res.Prefix + "/" + p.res.Name + "=" + id
}

// syncCDI brings the pool's CDI spec to states, which it returns with the
// devices the spec on disk lacks listed unhealthy: kubelet must not pick a
// device the runtime could not resolve. A pool without CDI has no spec
// (nil). The caller holds setMu.
func (p *Plugin) syncCDI(states []offer.State) ([]offer.State, cdiSpecOnDisk) {
	if !p.res.CDI {
		return states, nil
	}
	if !p.cdiCurrent(states) {
		if err := p.writeCDI(states); err != nil {
			if err.Error() != p.cdiErr { // SetDevices runs at every health change
				p.log.Error("CDI spec not written: the devices it lacks are listed unhealthy", "spec", p.cdiPath, "err", err)
			}
			p.cdiErr = err.Error()
		} else {
			p.cdiDisk = make(cdiSpecOnDisk, len(states))
			for i := range states {
				p.cdiDisk[states[i].ID] = states[i].Function
			}
			p.cdiErr = ""
		}
	}
	return p.withoutCDI(states), p.cdiDisk
}

// cdiCurrent reports whether the spec on disk is states' devices as they
// are, and only them.
func (p *Plugin) cdiCurrent(states []offer.State) bool {
	if len(p.cdiDisk) != len(states) {
		return false
	}
	for i := range states {
		if !p.cdiDisk.holds(&states[i]) {
			return false
		}
	}
	return true
}

// writeCDI writes the spec of states' devices, unless the file holds it.
func (p *Plugin) writeCDI(states []offer.State) error {
	spec := &cdispec.Spec{Version: handout.CDIVersion, Kind: p.res.Prefix + "/" + p.res.Name}
	for i := range states {
		h := p.maker.Make(&states[i].Device)
		spec.Devices = append(spec.Devices, cdispec.Device{Name: h.ID, ContainerEdits: handout.CDIEdits(h.ID, h)})
	}
	data, err := handout.MarshalCDISpec(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.cdiPath), 0o755); err != nil {
		return err
	}
	_, err = atomicfile.Replace(p.cdiPath, data, 0o644)
	return err
}

// withoutCDI lists the devices the spec on disk lacks unhealthy, in a
// copy: states is the caller's.
func (p *Plugin) withoutCDI(states []offer.State) []offer.State {
	out, cloned := states, false
	for i := range states {
		if p.cdiDisk.holds(&states[i]) {
			continue
		}
		if !cloned {
			out, cloned = slices.Clone(states), true
		}
		out[i].Healthy, out[i].Reason = false, fmt.Sprintf("its entry in the pool's CDI spec %s is not written: %s", p.cdiPath, p.cdiErr)
	}
	return out
}

// cdiDevices are the CDI devices of a container's devices.
func (p *Plugin) cdiDevices(devs []*offer.State) []*pluginapi.CDIDevice {
	out := make([]*pluginapi.CDIDevice, len(devs))
	for i, d := range devs {
		out[i] = &pluginapi.CDIDevice{Name: p.cdiName(d.ID)}
	}
	return out
}

// CDISpecPath is the pool's CDI spec, "" for a pool without CDI.
func (p *Plugin) CDISpecPath() string {
	if !p.res.CDI {
		return ""
	}
	return p.cdiPath
}

// cdiSpecDevices are the names of the devices the CDI spec at path lists;
// none for a spec that does not parse.
func cdiSpecDevices(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var spec cdispec.Spec
	if json.Unmarshal(data, &spec) != nil {
		return nil, nil
	}
	names := make([]string, 0, len(spec.Devices))
	for _, d := range spec.Devices {
		names = append(names, d.Name)
	}
	return names, nil
}

// StaleCDISpec is a CDI spec no pool writes any more: removable unless
// HeldDevice, a device it names, is held.
type StaleCDISpec struct {
	Path       string
	HeldDevice string
}

// StaleCDISpecs are the CDI specs device plugins wrote in dir that stale
// says no pool writes any more (a pool left the configuration, or turned
// cdi off) and that were last written before since. Each says a device
// it names that held reports held, if any: a container of the pod
// holding it needs the spec to start again. young says a spec no pool
// writes was left for being written since.
func StaleCDISpecs(dir string, stale func(path string) bool, held func(id string) bool, since time.Time) (out []StaleCDISpec, young bool, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, CDISpecPrefix+"*.json"))
	if err != nil {
		return nil, false, err
	}
	// A spec a pool writes is not read: at 2048 VFs it is the largest
	// file an idle agent would parse every collection.
	for _, path := range paths {
		if !stale(path) {
			continue
		}
		if !writtenBefore(path, since) {
			young = true
			continue
		}
		names, err := cdiSpecDevices(path)
		if err != nil {
			return nil, young, err
		}
		s := StaleCDISpec{Path: path}
		if i := slices.IndexFunc(names, held); i >= 0 {
			s.HeldDevice = names[i]
		}
		out = append(out, s)
	}
	return out, young, nil
}

func writtenBefore(path string, t time.Time) bool {
	st, err := os.Stat(path)
	return err == nil && st.ModTime().Before(t)
}
