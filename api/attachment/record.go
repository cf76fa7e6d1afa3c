// Package attachment is hwnet's CNI attachment record: what it attached to
// one container, enough to run every delegate's DEL again without the
// agent, the API server or the NetworkAttachmentDefinitions, which may
// all be gone by the time a pod is torn down. Package cni/attachments
// keeps one record file per container.
//
// A file is the record as one JSON object, then, once the ADD finished,
// a line with the attachments' results.
//
// Versions:
//
//   - unversioned: written before records carried a version; read as 1.
//   - 1.
//   - 2 (current): version 1 and each attachment's VF settings ("vf"),
//     which a version 1 reader leaves out (Record.Skipped says so). Since
//     issue 42 "vf" also holds the PF's PCI address ("pfPciAddress") and
//     what the VF had before ("prior"), which a reset puts back; a
//     version 2 record without them (an older hwnet's) is reset by the PF's
//     netdev name to the kernel's defaults, and an older hwnet reading a
//     newer record ignores them and does the same. Since issue 45 "vf"
//     may hold an InfiniBand partition key ("settings.pKey") and the
//     P_Key index the VF had ("priorPKeyIndex"), which an older hwnet
//     ignores, leaving the VF's key mapped.
//
// Decode reads every version, and a newer one too, as far as the fields
// it knows go: a record is read so that its pod can be torn down, and a
// DEL refused after a rollback would leave the pod Terminating for good.
// What it cannot read (a newer version's fields, an attachment of an odd
// shape) it leaves out and says in Record.Skipped.
package attachment

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// Version is the format this hwnet writes.
const Version = 2

// MaxSize is the largest record file read: a container's attachments
// with their configuration lists and results take a few KiB each.
const MaxSize = 1 << 20

// Record is what hwnet attached, or began to attach, to one container.
type Record struct {
	// Version is the format version the record was read in; Encode
	// writes Version whatever it holds.
	Version      int          `json:"version,omitempty"`
	ContainerID  string       `json:"containerID"`
	Netns        string       `json:"netns"`
	PodNamespace string       `json:"podNamespace,omitempty"`
	PodName      string       `json:"podName,omitempty"`
	PodUID       string       `json:"podUID,omitempty"`
	Attachments  []Attachment `json:"attachments"`
	// Skipped says what Decode could not read and left out, for the
	// teardown to report: empty for a record this hwnet wrote whole.
	Skipped []string `json:"-"`
}

// Attachment is one network attachment: the tuple [container ID, network
// name, ifname] of NPWG 4.2.1 and the exact configuration list it ran with.
type Attachment struct {
	// Network is "namespace/name" for a NetworkAttachmentDefinition, or
	// the cluster-wide default network's name.
	Network string `json:"network"`
	IfName  string `json:"ifName"`
	Default bool   `json:"default,omitempty"`
	// ConfList is the configuration list as run, injections included.
	ConfList json.RawMessage `json:"confList"`
	// Args are the CNI_ARGS pairs given to the delegate.
	Args [][2]string `json:"args,omitempty"`
	// CapabilityArgs are the runtimeConfig values given to the delegate.
	CapabilityArgs map[string]json.RawMessage `json:"capabilityArgs,omitempty"`
	// DeviceID is the PCI address kubelet allocated to this attachment.
	DeviceID string `json:"deviceID,omitempty"`
	// Resource is the device plugin resource DeviceID belongs to.
	Resource string `json:"resource,omitempty"`
	// Claim is the UID of the DRA claim DeviceID came from, absent for a
	// device kubelet allocated through a device plugin (and in records
	// written before it was kept, which older readers skip): a shared
	// claim's pods other than the one it was prepared for hold its
	// devices through it.
	Claim string `json:"claim,omitempty"`
	// DeviceInfoFile is the CNI device-info file hwnet wrote for it.
	DeviceInfoFile string `json:"deviceInfoFile,omitempty"`
	// PodNetwork is the KEP-3698 PodNetwork the attachment serves, and
	// DefaultRoute is set when the pod's selection gave it the default
	// route: with the result, all the pod's network-status needs, so an
	// agent killed before writing it can write it from the record.
	PodNetwork   string        `json:"podNetwork,omitempty"`
	DefaultRoute *DefaultRoute `json:"defaultRoute,omitempty"`
	// VF is what hwnet sets on the device's VF through its PF from the
	// network's sriov-cni keys (version 2), recorded before it is set:
	// DEL resets it, whether or not the ADD got to set it.
	VF *vfsettings.Record `json:"vf,omitempty"`
	// Result is the ADD's result, which DEL and CHECK give the delegate
	// as prevResult; absent until the ADD succeeded. EncodeResults
	// writes it on the file's results line.
	Result json.RawMessage `json:"result,omitempty"`
}

// DefaultRoute is the default route an attachment holds (NPWG
// 4.1.2.1.9 "default-route", KEP-3698 isDefaultGW).
type DefaultRoute struct {
	// Gateways are those the selection named; none for KEP-3698, whose
	// gateways are the result's.
	Gateways []string `json:"gateways,omitempty"`
}

// AddResult is the ADD's result, nil when the ADD did not finish or the
// result cannot be read: a delegate's DEL must cope without prevResult
// (CNI spec, DEL), so that must not stop the DEL.
func (a Attachment) AddResult() types.Result {
	if len(a.Result) == 0 {
		return nil
	}
	res, err := create.CreateFromBytes(a.Result)
	if err != nil {
		return nil
	}
	return res
}
