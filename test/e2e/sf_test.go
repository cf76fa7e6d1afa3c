package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// sfPF is the e2e node's ConnectX-6 Dx, whose two scalable functions an
// auxNetDevice pool takes.
const sfPF = "p2"

const (
	sfResource corev1.ResourceName = "nvidia.com/sf"
	// sfPool is the pool of sfPF's SFs, as sriovdp's configuration has it.
	sfPool = "  - {resourceName: sf, resourcePrefix: nvidia.com, deviceType: auxNetDevice, selectors: {auxTypes: [sf], pfNames: [" + sfPF + "]}}\n"
	sfNAD  = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: sf-net
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/resourceName: nvidia.com/sf}
spec:
  config: '{"cniVersion": "1.0.0", "name": "sf-net", "type": "host-device"}'
`
)

// sfPFAddress is sfPF's PCI address on the virtual node.
func (e *env) sfPFAddress(t *testing.T) string {
	t.Helper()
	for _, f := range e.c.Node().Devices() {
		if f.Ifname == sfPF {
			return f.Addr
		}
	}
	t.Fatalf("the node has no PF %s", sfPF)
	return ""
}

// TestSFThroughTheDevicePlugin: an auxNetDevice pool lists the PF's
// scalable functions to kubelet; a pod asking for one through a NAD gets
// it: kubelet's allocation names the SF in PCIDEVICE_NVIDIA_COM_SF, its
// netdev is moved into the pod by host-device (found by the SF's sysfs
// path), and network-status's device-info names the SF and its PF.
// Deleting the pod leaves the node as it was.
func TestSFThroughTheDevicePlugin(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original := e.defaultPools(t)
	e.usePools(ctx, t, append(append([]byte{}, original...), sfPool...))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	e.waitAllocatable(ctx, t, sfResource, 2)
	e.applyForTest(ctx, t, sfNAD, "network-attachment-definitions.k8s.cni.cncf.io/sf-net")
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("sf-pod", `[{"name": "sf-net"}]`, map[corev1.ResourceName]int64{sfResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := networkStatus(t, pod)[1]
	sf := pciAddress(st)
	if pf := e.sfPFAddress(t); !strings.HasPrefix(sf, "mlx5_core.sf.") || st.DeviceInfo.Pci.PfPciAddress != pf {
		t.Errorf("network-status device-info %+v: want an SF of %s", *st.DeviceInfo.Pci, pf)
	}
	if env := e.podEnv(ctx, t, pod.Name)["PCIDEVICE_NVIDIA_COM_SF"]; env != sf {
		t.Errorf("PCIDEVICE_NVIDIA_COM_SF=%q, want the SF of network-status %q", env, sf)
	}
	var netdev string
	for _, f := range e.c.Node().Devices() {
		for _, s := range f.SFs {
			if s.Name == sf {
				netdev = s.Netdev.Name
			}
		}
	}
	if link, ok := podLinks(t, e.containerPID(ctx, t, pod))["net1"]; !ok || netdev == "" || link.Alias != netdev {
		t.Errorf("the pod's net1 %+v: want the SF's netdev %q moved in (%s)", link, netdev, fmt.Sprint(ok))
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}

// sfClaim is a DeviceClass of the SF pool and a claim template for one SF
// attached to sf-net as net1.
const sfClaim = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: hwnet-e2e-sf
spec:
  selectors:
    - cel:
        expression: device.driver == "hwnet.io" && device.attributes["hwnet.io"].pool == "nvidia.com/sf"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-sf
  namespace: default
spec:
  spec:
    devices:
      requests: [{name: sf, exactly: {deviceClassName: hwnet-e2e-sf}}]
      config:
        - requests: [sf]
          opaque:
            driver: hwnet.io
            parameters: {apiVersion: hwnet.io/v1alpha1, kind: NetworkConfig, networks: [{name: sf-net, interface: net1}]}
`

// TestSFThroughADRAClaim: the SF pool in DRA mode publishes each SF as a
// device named after its auxiliary device; a claim for one, attached to
// sf-net, gives the pod the SF's netdev as net1, and the claim's
// status.devices entry names net1 with its MAC, Ready. Deleting the pod
// leaves the node as it was.
func TestSFThroughADRAClaim(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original := e.defaultPools(t)
	dra := strings.Replace(sfPool, "deviceType: auxNetDevice,", "deviceType: auxNetDevice, mode: dra,", 1)
	e.usePools(ctx, t, append(append([]byte{}, original...), dra...))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	e.applyForTest(ctx, t, sfNAD, "network-attachment-definitions.k8s.cni.cncf.io/sf-net")
	e.applyForTest(ctx, t, sfClaim, "resourceclaimtemplates.resource.k8s.io/one-sf")
	t.Cleanup(func() {
		if _, err := Kubectl(context.Background(), e.c, nil, "delete", "--ignore-not-found", "deviceclass", "hwnet-e2e-sf"); err != nil {
			t.Error(err)
		}
	})
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("sf-claim-pod", "", nil)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "sf", ResourceClaimTemplateName: new("one-sf")}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "sf"}}
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := networkStatus(t, pod)[1]
	if sf := pciAddress(st); st.Interface != "net1" || !strings.HasPrefix(sf, "mlx5_core.sf.") || st.DeviceInfo.Pci.PfPciAddress != e.sfPFAddress(t) {
		t.Errorf("network-status[1] %+v (device-info %+v): want net1 on an SF of %s", st, *st.DeviceInfo.Pci, sfPF)
	}
	devs := e.claimDevices(ctx, t, pod)
	if len(devs) != 1 || !strings.HasPrefix(devs[0].Device, "aux-mlx5-core-sf-") || devs[0].NetworkData == nil ||
		devs[0].NetworkData.InterfaceName != "net1" || devs[0].NetworkData.HardwareAddress == "" || !readyTrue(devs[0]) {
		t.Errorf("claim status.devices %+v: want the SF's device attached as net1 with its MAC, Ready", devs)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}
