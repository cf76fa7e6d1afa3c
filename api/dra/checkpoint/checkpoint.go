// Package checkpoint is the DRA driver's checkpoint file: every claim the
// driver prepared on the node, with what unprepare must undo. Kubelet's
// unprepare names only the claim, which may be gone from the API server,
// and the agent may have restarted (or been upgraded, or rolled back)
// since it prepared it, so the file outlives any one hwnet version.
//
// Versions:
//
//   - 1: claims, no checksum.
//   - 2: claims and a checksum over them.
//   - 3 (current): version 2 and each device's VF settings ("vf"), which
//     version 2 readers skip: a rollback to one leaves them set. Since
//     issue 42 "vf" also holds the PF's PCI address and what the VF had
//     before ("pfPciAddress", "prior"), optional fields a version 3 reader
//     without them ignores (it resets to the kernel's defaults by the PF's
//     name, as it did); a record without them is reset so too. Since
//     issue 44 a device may carry "rebind" (the driver prepare bound its
//     VF to, and what it was on) and a claim "unfinished" (recorded
//     before its VFs were rebound, its prepare not done): optional too,
//     a version 3 reader without them leaves a rebound VF on the claim's
//     driver. Since issue 45 "vf" may hold an InfiniBand partition key
//     ("settings.pKey") and the P_Key index the VF had ("priorPKeyIndex"):
//     optional too, a version 3 reader without them leaves the VF's key
//     mapped, as a rollback to version 2 leaves every setting. A claim
//     may carry "bootID", the node's boot it was prepared in: optional
//     too, a version 3 reader without it answers a claim of an earlier
//     boot from the checkpoint, as it did.
//
// Decode reads every version. It reads a newer version too, as far as
// the fields it knows go (each claim's UID, CDI spec and devices are
// what unprepare needs), so that rolling the agent back never blocks
// kubelet's NodeUnprepareResources; the first save then writes the
// current version, which the newer hwnet reads as an older one.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Version is the format this hwnet writes.
const Version = 3

// MaxSize is the largest checkpoint read: some 30,000 prepared claims,
// far more than a node holds.
const MaxSize = 16 << 20

// fileFormat is the checkpoint's envelope: every version has a version
// field.
func fileFormat() fileformat.Format {
	return fileformat.Format{Name: "DRA checkpoint", Current: Version, MaxSize: MaxSize}
}

// Checkpoint is the file's content, in the current version.
type Checkpoint struct {
	// Version is the format version the checkpoint was read in; Encode
	// writes Version whatever it holds.
	Version int `json:"version"`
	// Checksum is the checksum of Claims as written (package fileformat).
	Checksum uint32 `json:"checksum"`
	// Claims are the prepared claims by UID.
	Claims map[types.UID]*Claim `json:"claims"`
}

// Claim is what prepare made for one claim.
type Claim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// CDISpec is the claim's CDI spec file, which unprepare removes.
	CDISpec string   `json:"cdiSpec"`
	Devices []Device `json:"devices"`
	// Pods are the UIDs of the pods the claim is reserved for, whose
	// sandboxes' CNI ADD attach its devices.
	Pods []string `json:"pods,omitempty"`
	// Prepared is when the claim was prepared, which the device ledger
	// reports as the hold's start; absent in claims prepared before it
	// was recorded (older versions ignore it).
	Prepared time.Time `json:"prepared,omitzero"`
	// BootID is the node's boot ID (/proc/sys/kernel/random/boot_id)
	// when the claim was prepared; absent in claims recorded before it
	// was (older versions ignore it). A claim of an earlier boot lost
	// what prepare made: its CDI spec and device-info files were on
	// tmpfs, its VFs came back with the kernel's settings and drivers.
	BootID string `json:"bootID,omitempty"`
	// Unfinished marks a claim recorded before its VFs were rebound,
	// whose prepare did not end: its VFs go back to what they were on
	// and it is prepared again.
	Unfinished bool `json:"unfinished,omitempty"`
}

// Device is one device of a prepared claim.
type Device struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// Resource and PCIAddress name the device's device-info file, which
	// unprepare removes.
	Resource   string `json:"resource"`
	PCIAddress string `json:"pciAddress"`
	CDIDevice  string `json:"cdiDevice"`
	// Network is the device's element of its hwnet configuration's
	// "networks" (package api/netclaim), absent without one.
	Network json.RawMessage `json:"network,omitempty"`
	// VF is what prepare set, or was setting, on the VF through its PF
	// (version 3), written before the first setting: unprepare resets it.
	VF *vfsettings.Record `json:"vf,omitempty"`
	// Rebind is the driver prepare binds the VF to, recorded before the
	// unbind: unprepare puts the VF back as it was.
	Rebind *Rebind `json:"rebind,omitempty"`
}

// Rebind is a VF's driver change for a claim.
type Rebind struct {
	// Driver is the driver the claim asked for.
	Driver string `json:"driver"`
	// WasDriver and WasOverride are the VF's driver ("" unbound) and
	// driver_override ("" unset) before.
	WasDriver   string `json:"wasDriver,omitempty"`
	WasOverride string `json:"wasOverride,omitempty"`
}

// Marker is what Encode writes in the file's "format" field (outside
// the checksum, which older readers ignore): the device ledger reads every
// DRA driver's plugin directory and tells hwnet's checkpoints by it.
const Marker = "hwnet.io/dra-checkpoint"

// Owned reports whether data, the checkpoint.json of the DRA driver
// named driverName, is an hwnet checkpoint: it carries the Marker
// (looked for in the bytes, so that a torn file still counts), or,
// written before there was one, it decodes as a checkpoint whose devices
// all have CDI names of the driver's kind, "<driverName>/net=...".
func Owned(data []byte, driverName string) bool {
	if bytes.Contains(data, []byte(`"`+Marker+`"`)) {
		return true
	}
	cp, err := Decode(data)
	if err != nil || cp.Version > 3 {
		return false
	}
	for _, c := range cp.Claims {
		for _, d := range c.Devices {
			if !strings.HasPrefix(d.CDIDevice, driverName+"/net=") {
				return false
			}
		}
	}
	return true
}

// New is an empty checkpoint of the current version.
func New() *Checkpoint {
	return &Checkpoint{Version: Version, Claims: map[types.UID]*Claim{}}
}

// Encode is the checkpoint's file content in the current version, its
// checksum computed: the claims as json.Marshal writes them, with no
// insignificant white space (fileformat.ChecksumMarshaled), and the
// envelope written around them as they are. With 100 claims of 4
// devices (156 kB), compacting them for the checksum and once more
// inside an indented envelope took 1.7 ms of Encode's 2.3 (2 vCPU AMD
// EPYC). A writer that saves often keeps an Encoder instead.
func Encode(cp *Checkpoint) ([]byte, error) {
	var e Encoder
	return e.Encode(cp, false)
}
