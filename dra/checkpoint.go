package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// checkpointFile, in the plugin directory, records every prepared claim:
// kubelet's unprepare names only the claim, which may be gone from the API
// server, and the agent may have restarted since it prepared it.
const checkpointFile = "checkpoint.json"

// checkpointVersion is the format written; a file of another version is
// an error rather than a guess.
const checkpointVersion = 1

type checkpoint struct {
	Version int                          `json:"version"`
	Claims  map[types.UID]*preparedClaim `json:"claims"`
}

// preparedClaim is what prepare made for one claim.
type preparedClaim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// CDISpec is the claim's CDI spec file.
	CDISpec string           `json:"cdiSpec"`
	Devices []preparedDevice `json:"devices"`
	// Pods are the UIDs of the pods the claim is reserved for, whose
	// sandboxes' CNI ADD attach its devices.
	Pods []string `json:"pods,omitempty"`
	// uid is the claim's UID, the checkpoint's key, set when listed.
	uid string
}

// preparedDevice is one device of a prepared claim.
type preparedDevice struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// Resource and PCIAddress name the device's device-info file.
	Resource   string `json:"resource"`
	PCIAddress string `json:"pciAddress"`
	CDIDevice  string `json:"cdiDevice"`
	// Network is the device's element of its hwnet configuration's
	// "networks" (package netclaim), absent without one.
	Network json.RawMessage `json:"network,omitempty"`
}

// checkpointStore reads and writes the checkpoint file. Kubelet's calls
// are serialized by the DRA library, so each loads, changes and saves.
type checkpointStore struct {
	path string
}

func (s *checkpointStore) load() (*checkpoint, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &checkpoint{Version: checkpointVersion, Claims: map[types.UID]*preparedClaim{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", s.path, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %s: version %d: want %d", s.path, cp.Version, checkpointVersion)
	}
	if cp.Claims == nil {
		cp.Claims = map[types.UID]*preparedClaim{}
	}
	return &cp, nil
}

func (s *checkpointStore) save(cp *checkpoint) error {
	data, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := atomicfile.Write(s.path, data, 0o600); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// holder is the claim other than uid that holds the device, "" for none.
func (cp *checkpoint) holder(device string, uid types.UID) string {
	for other, pc := range cp.Claims {
		if other == uid {
			continue
		}
		for _, d := range pc.Devices {
			if d.Device == device {
				return pc.Namespace + "/" + pc.Name
			}
		}
	}
	return ""
}
