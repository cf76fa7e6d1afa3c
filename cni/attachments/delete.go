package attachments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/libcni"
)

// Runtime is the libcni runtime configuration the attachment ran with.
func (r *Record) Runtime(a Attachment) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: r.ContainerID,
		NetNS:       r.Netns,
		IfName:      a.IfName,
		Args:        a.Args,
	}
	if len(a.CapabilityArgs) > 0 {
		rt.CapabilityArgs = make(map[string]interface{}, len(a.CapabilityArgs))
		for k, v := range a.CapabilityArgs {
			rt.CapabilityArgs[k] = v
		}
	}
	return rt
}

// ConfigList parses the configuration list the attachment ran with.
func (a Attachment) ConfigList() (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes(a.ConfList)
	if err != nil {
		return nil, fmt.Errorf("network %s interface %s: %w", a.Network, a.IfName, err)
	}
	return list, nil
}

// DeleteAll runs DEL for every attachment in reverse order. A failure does
// not stop the rest (NPWG 7.2); the returned error lists every failure.
// Device-info files of attachments whose DEL succeeded are removed.
func DeleteAll(ctx context.Context, cni libcni.CNI, rec *Record) error {
	var errs []error
	for i := len(rec.Attachments) - 1; i >= 0; i-- {
		if err := deleteOne(ctx, cni, rec, rec.Attachments[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func deleteOne(ctx context.Context, cni libcni.CNI, rec *Record, a Attachment) error {
	list, err := a.ConfigList()
	if err != nil {
		return err
	}
	if err := cni.DelNetworkList(ctx, list, rec.Runtime(a)); err != nil {
		return fmt.Errorf("DEL network %s interface %s: %w", a.Network, a.IfName, err)
	}
	if a.DeviceInfoFile != "" {
		if err := os.Remove(a.DeviceInfoFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("network %s interface %s: device-info: %w", a.Network, a.IfName, err)
		}
	}
	return nil
}

// EncodeCapabilityArgs encodes runtimeConfig values for a record.
func EncodeCapabilityArgs(values map[string]interface{}) (map[string]json.RawMessage, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(values))
	for k, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("runtimeConfig %q: %w", k, err)
		}
		out[k] = raw
	}
	return out, nil
}
