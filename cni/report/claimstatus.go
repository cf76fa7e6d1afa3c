package report

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	mathrand "math/rand/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// ClaimReadyCondition is the condition hwnet sets on each claimed device
// it attached to a network (KEP-4817 status.devices[].conditions).
const ClaimReadyCondition = "Ready"

// ClaimStatusWriter writes the KEP-4817 device status of DRA claims:
// status.devices[] with networkData and a Ready condition, by
// server-side apply of resourceclaims/status, one PATCH per claim. Its
// field manager owns only the entries it applies, so other drivers'
// devices of a claim are never touched. The API server lets a driver
// write only entries of devices allocated to it, and only with the
// "resourceclaims/driver" permission for its name.
type ClaimStatusWriter struct {
	client       kubernetes.Interface
	fieldManager string
	now          func() time.Time
}

// NewClaimStatusWriter returns a writer applying as fieldManager.
func NewClaimStatusWriter(client kubernetes.Interface, fieldManager string) *ClaimStatusWriter {
	return &ClaimStatusWriter{client: client, fieldManager: fieldManager, now: time.Now}
}

// SetClaimDeviceStatus applies the devices' status to the claim,
// retrying as SetNetworkStatus does until ctx ends.
func (w *ClaimStatusWriter) SetClaimDeviceStatus(ctx context.Context, claim netclaim.ClaimRef, devices []netclaim.DeviceStatus) error {
	ac := w.applyConfig(claim, devices)
	delay := firstPatchRetryDelay
	for attempt := 1; ; attempt++ {
		err := w.apply(ctx, claim, ac)
		switch {
		case err == nil:
			return nil
		case !retriable(err):
			return fmt.Errorf("set device status of ResourceClaim %s: %w", claim, err)
		}
		select {
		case <-time.After(delay/2 + mathrand.N(delay)):
		case <-ctx.Done():
			return fmt.Errorf("set device status of ResourceClaim %s: %w after %d attempts, the last: %w", claim, ctx.Err(), attempt, err)
		}
		delay = min(2*delay, maxPatchRetryDelay)
	}
}

func (w *ClaimStatusWriter) apply(ctx context.Context, claim netclaim.ClaimRef, ac *resourceac.ResourceClaimApplyConfiguration) error {
	ctx, cancel := context.WithTimeout(ctx, patchAttemptTimeout)
	defer cancel()
	_, err := w.client.ResourceV1().ResourceClaims(claim.Namespace).ApplyStatus(ctx, ac,
		metav1.ApplyOptions{FieldManager: w.fieldManager, Force: true})
	return err
}

// DeviceData is the driver-specific data of a claimed device's status
// entry: the VF settings applied to it, in the claim configuration's
// names, and its representor netdev on a switchdev eSwitch.
type DeviceData struct {
	VF          *vfsettings.Settings `json:"vf,omitempty"`
	Representor string               `json:"representor,omitempty"`
}

func deviceData(d netclaim.DeviceStatus) runtime.RawExtension {
	// A struct of pointers and strings always marshals.
	raw, _ := json.Marshal(DeviceData{VF: d.VF, Representor: d.Representor})
	return runtime.RawExtension{Raw: raw}
}

// applyConfig is the claim's status.devices entries for devices; the
// claim's UID makes the API server refuse it for a claim of the same name
// that replaced this one.
func (w *ClaimStatusWriter) applyConfig(claim netclaim.ClaimRef, devices []netclaim.DeviceStatus) *resourceac.ResourceClaimApplyConfiguration {
	now := metav1.NewTime(w.now().Truncate(time.Second))
	st := resourceac.ResourceClaimStatus()
	for _, d := range devices {
		nd := resourceac.NetworkDeviceData().WithInterfaceName(d.InterfaceName).WithIPs(d.IPs...)
		if d.HardwareAddress != "" {
			nd.WithHardwareAddress(strings.ToLower(d.HardwareAddress))
		}
		ready := metav1ac.Condition().WithType(ClaimReadyCondition).WithStatus(metav1.ConditionTrue).
			WithReason("NetworkAttached").WithLastTransitionTime(now).
			WithMessage(fmt.Sprintf("attached to network %s as %s", d.Network, d.InterfaceName))
		dev := resourceac.AllocatedDeviceStatus().WithDriver(d.Driver).WithPool(d.Pool).WithDevice(d.Device).
			WithNetworkData(nd).WithConditions(ready)
		if d.VF != nil || d.Representor != "" {
			dev.WithData(deviceData(d))
		}
		st.WithDevices(dev)
	}
	ac := resourceac.ResourceClaim(claim.Name, claim.Namespace).WithStatus(st)
	if claim.UID != "" {
		ac.WithUID(types.UID(claim.UID))
	}
	return ac
}
