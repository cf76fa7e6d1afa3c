package kubeapi

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Allocation is a claim and the devices the scheduler would allocate it:
// Devices of Driver's Pool, asked for by one request "vfs" of Class.
type Allocation struct {
	Namespace, Name string
	Class           string
	Driver, Pool    string
	Devices         []string
	// ReservedFor are the pods the claim is reserved for, as the
	// scheduler reserves it for the pod it places: the DRA driver's
	// checkpoint names them, and the CNI side finds a pod's claims so.
	ReservedFor []*corev1.Pod
	// Config, when set, is the driver's opaque parameters for the
	// request, as a DeviceClass would give them.
	Config string
}

// AllocatedClaim creates the claim of a and allocates it a's devices, as
// the scheduler would.
func (s *Server) AllocatedClaim(t testing.TB, a Allocation) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	claims := s.client.ResourceV1().ResourceClaims(a.Namespace)
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "vfs", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: a.Class,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(len(a.Devices))}}}}}}
	c, err := claims.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := &resourceapi.AllocationResult{}
	for _, d := range a.Devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "vfs", Driver: a.Driver, Pool: a.Pool, Device: d})
	}
	if a.Config != "" {
		alloc.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClass,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: a.Driver, Parameters: runtime.RawExtension{Raw: []byte(a.Config)}}}}}
	}
	c.Status.Allocation = alloc
	for _, p := range a.ReservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
			Resource: "pods", Name: p.Name, UID: p.UID})
	}
	if c, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}
