// Package events posts Kubernetes Events on the node about its devices,
// its declared VF layouts, its pool configuration and the CNI side's
// runtime GC, where `kubectl describe node` shows an admin what the
// agent's logs say.
package events

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Reasons of the Node Events about device health, configuration and the
// runtime GC.
const (
	ReasonDeviceUnhealthy = "DeviceUnhealthy"
	ReasonDeviceHealthy   = "DeviceHealthy"
	ReasonConfigRejected  = "PoolConfigRejected"
	ReasonRuntimeGCSkip   = "RuntimeGCSkipped"
)

// Node posts Events about this node's devices; a nil *Node posts nothing
// (the agent without an API server client).
type Node struct {
	recorder record.EventRecorder
	node     *corev1.ObjectReference
}

// Start records Events on the node until ctx ends.
func Start(ctx context.Context, client kubernetes.Interface, node string) *Node {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	return &Node{
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "hwnet-agent", Host: node}),
		// kubelet refers to its node with the name as UID; kubectl
		// describe node finds Events by it.
		node: &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)},
	}
}

// DeviceHealth reports a device turning unhealthy, with the reason, or
// coming back.
func (e *Node) DeviceHealth(resource, device string, healthy bool, reason string) {
	if e == nil {
		return
	}
	if healthy {
		e.recorder.Eventf(e.node, corev1.EventTypeNormal, ReasonDeviceHealthy, "%s device %s is healthy again", resource, device)
		return
	}
	e.recorder.Event(e.node, corev1.EventTypeWarning, ReasonDeviceUnhealthy, fmt.Sprintf("%s device %s is unhealthy: %s", resource, device, reason))
}

// ConfigRejected reports a pool configuration file the agent does not
// serve, and why.
func (e *Node) ConfigRejected(file, reason string) {
	if e == nil {
		return
	}
	e.recorder.Eventf(e.node, corev1.EventTypeWarning, ReasonConfigRejected, "pool configuration %s rejected, the last good one is served: %s", file, reason)
}

// RuntimeGCSkipped reports a runtime GC round that tore nothing down
// because the runtime's answer was not believed, and why.
func (e *Node) RuntimeGCSkipped(why string) {
	if e == nil {
		return
	}
	e.recorder.Event(e.node, corev1.EventTypeWarning, ReasonRuntimeGCSkip, why)
}
