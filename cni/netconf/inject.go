package netconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// CapabilityError says a network selection key needs a capability no plugin
// in the list declares (NPWG 4.1.2.1.3.2, 4.1.2.1.4.2, 4.1.2.1.7.2,
// 4.1.2.1.8.2): the attachment must fail rather than silently drop the key.
type CapabilityError struct {
	Network, Source, Capability string
}

// SelectionKey is the key of the pod's network selection element that asks
// for the capability.
func (e *CapabilityError) SelectionKey() string {
	if e.Capability == "infinibandGUID" {
		return "infiniband-guid"
	}
	return e.Capability
}

func (e *CapabilityError) Error() string {
	network := fmt.Sprintf("network %q", e.Network)
	if e.Source != "" {
		network += " (" + e.Source + ")"
	}
	return fmt.Sprintf(`%s: selection key %q needs a plugin with "capabilities": {%q: true}, and none has it`,
		network, e.SelectionKey(), e.Capability)
}

// Check verifies that each capability is declared true by at least one
// plugin, returning a *CapabilityError for every one that is not.
func (d *Delegate) Check(capabilities ...string) error {
	declared := d.Capabilities()
	var errs []error
	for _, c := range capabilities {
		if !declared[c] {
			errs = append(errs, &CapabilityError{Network: d.Name, Source: d.Source, Capability: c})
		}
	}
	return errors.Join(errs...)
}

// Capabilities is the union of the capabilities the plugins declare true.
func (d *Delegate) Capabilities() map[string]bool {
	union := make(map[string]bool)
	for _, p := range d.Plugins {
		for c, on := range p.Capabilities {
			if on {
				union[c] = true
			}
		}
	}
	return union
}

// Injection is what the delegator adds to a NetworkAttachmentDefinition's
// configuration for one pod attachment.
type Injection struct {
	// DeviceID is the device kubelet allocated: a PCI address, or a
	// scalable function's auxiliary device name. It sets "deviceID" in
	// every plugin, and "pciBusID" in the first plugin unless it names its
	// device by "device", "hwaddr" or "kernelpath" (as host-device takes
	// them) and in any plugin that already has one: the allocation wins
	// over the NAD.
	DeviceID string
	// KernelPath is the sysfs directory, /sys/devices/..., of a device
	// that is no PCI function (a scalable function, whose DeviceID is its
	// auxiliary device name): the plugin that would get "pciBusID" gets
	// "kernelpath" instead, which host-device finds the netdev under.
	KernelPath string
	// DeviceInfoFile sets "CNIDeviceInfoFile" in every plugin (NPWG
	// device-info spec v1.1.0).
	DeviceInfoFile string
	// CNIArgs are the pod's cni-args, merged into every plugin's
	// "args": {"cni": {...}} over the NAD's own (4.1.2.1.6.2).
	CNIArgs map[string]json.RawMessage
}

// Inject returns a copy of d with in applied; d is never modified. An empty
// DeviceID leaves device keys as the NAD wrote them.
func (d *Delegate) Inject(in Injection) (*Delegate, error) {
	values, err := in.prepare()
	if err != nil {
		return nil, err
	}
	out := *d
	out.Plugins = make([]Plugin, len(d.Plugins))
	for i, p := range d.Plugins {
		q, err := p.inject(values, i == 0)
		if err != nil {
			return nil, withSource(d.Source, fmt.Errorf("plugins[%d] (%s): %w", i, p.Type, err))
		}
		out.Plugins[i] = q
	}
	return &out, nil
}

// injectedValues is an Injection encoded once for all plugins; nil values
// are not injected. The plugins of the result share them, read-only.
type injectedValues struct {
	deviceID, kernelPath, deviceInfoFile json.RawMessage
	cniArgs                              map[string]json.RawMessage
	// argsAlone is "args" for a plugin that has none: {"cni": cniArgs}.
	argsAlone json.RawMessage
}

func (in Injection) prepare() (injectedValues, error) {
	var v injectedValues
	if in.DeviceID != "" {
		v.deviceID = quote(in.DeviceID)
	}
	if in.KernelPath != "" {
		v.kernelPath = quote(in.KernelPath)
	}
	if in.DeviceInfoFile != "" {
		v.deviceInfoFile = quote(in.DeviceInfoFile)
	}
	if len(in.CNIArgs) == 0 {
		return v, nil
	}
	for key, value := range in.CNIArgs {
		if !json.Valid(value) {
			return v, fmt.Errorf("cni-args %q: invalid JSON %s", key, excerpt(value))
		}
	}
	v.cniArgs = in.CNIArgs
	var err error
	v.argsAlone, err = encode(map[string]map[string]json.RawMessage{"cni": in.CNIArgs})
	return v, err
}

// quote encodes a string, which cannot fail.
func quote(s string) json.RawMessage {
	raw, _ := json.Marshal(s)
	return raw
}

func (p Plugin) inject(v injectedValues, first bool) (Plugin, error) {
	fields := make(map[string]json.RawMessage, len(p.Fields)+4)
	maps.Copy(fields, p.Fields)
	if v.deviceID != nil {
		takesPCI := takesPCIAddress(fields, first)
		setField(fields, "deviceID", v.deviceID)
		switch {
		case takesPCI && v.kernelPath != nil:
			maps.DeleteFunc(fields, func(k string, _ json.RawMessage) bool { return strings.EqualFold(k, "pciBusID") })
			setField(fields, "kernelpath", v.kernelPath)
		case takesPCI:
			setField(fields, "pciBusID", v.deviceID)
		}
	}
	if v.deviceInfoFile != nil {
		setField(fields, "CNIDeviceInfoFile", v.deviceInfoFile)
	}
	if v.cniArgs != nil {
		args, err := mergeCNIArgs(fields["args"], v)
		if err != nil {
			return Plugin{}, err
		}
		fields["args"] = args
	}
	return Plugin{Type: p.Type, Capabilities: maps.Clone(p.Capabilities), Fields: fields}, nil
}

// takesPCIAddress reports whether a plugin picks its device by "pciBusID", as
// host-device does: it already has one, or it is the list's first plugin (the
// one that creates the interface; later ones act on prevResult) and names no
// device by host-device's other keys.
func takesPCIAddress(fields map[string]json.RawMessage, first bool) bool {
	if hasKeyFold(fields, "pciBusID") {
		return true
	}
	return first && !hasKeyFold(fields, "device") && !hasKeyFold(fields, "hwaddr") && !hasKeyFold(fields, "kernelpath")
}

// hasKeyFold matches keys case-insensitively because plugins decode their
// configuration into Go structs, which do.
func hasKeyFold(fields map[string]json.RawMessage, key string) bool {
	for k := range fields {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// setField sets key, removing spellings that differ only in case so that a
// plugin's case-insensitive decoding cannot pick the NAD's value over the
// injected one.
func setField(fields map[string]json.RawMessage, key string, value json.RawMessage) {
	maps.DeleteFunc(fields, func(k string, _ json.RawMessage) bool { return strings.EqualFold(k, key) })
	fields[key] = value
}

// mergeCNIArgs puts the pod's cni-args into args.cni (CNI CONVENTIONS.md),
// keeping the NAD's other cni keys and other namespaces under args.
func mergeCNIArgs(raw json.RawMessage, v injectedValues) (json.RawMessage, error) {
	if raw == nil || string(raw) == "null" {
		return v.argsAlone, nil
	}
	args, err := objectOf(raw, "args")
	if err != nil {
		return nil, err
	}
	cni := make(map[string]json.RawMessage, len(v.cniArgs))
	if raw, ok := args["cni"]; ok && string(raw) != "null" {
		if cni, err = objectOf(raw, "args.cni"); err != nil {
			return nil, err
		}
	}
	maps.Copy(cni, v.cniArgs)
	if args["cni"], err = encode(cni); err != nil {
		return nil, fmt.Errorf("args.cni: %w", err)
	}
	return encode(args)
}
