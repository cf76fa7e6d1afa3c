package kubeapi

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// SliceDevices is the devices of ResourceSlices by device name.
type SliceDevices map[string]resourceapi.Device

// WaitSliceDevices waits until the devices of the ResourceSlices opts
// selects satisfy cond and returns them. It lists, then watches from that
// list for the next change, so no change is missed and nothing sleeps.
func WaitSliceDevices(t testing.TB, client kubernetes.Interface, opts metav1.ListOptions, timeout time.Duration, what string, cond func(SliceDevices) bool) SliceDevices {
	t.Helper()
	var devs SliceDevices
	WaitSlices(t, client, opts, timeout, what, func(slices []resourceapi.ResourceSlice) bool {
		devs = SliceDevices{}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				devs[d.Name] = d
			}
		}
		return cond(devs)
	})
	return devs
}

// WaitSlices waits until the ResourceSlices opts selects, sorted by
// name, satisfy cond and returns them, as WaitSliceDevices does.
func WaitSlices(t testing.TB, client kubernetes.Interface, opts metav1.ListOptions, timeout time.Duration, what string, cond func([]resourceapi.ResourceSlice) bool) []resourceapi.ResourceSlice {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		slices.SortFunc(list.Items, func(a, b resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
		if cond(list.Items) {
			return list.Items
		}
		wopts := opts
		wopts.ResourceVersion = list.ResourceVersion
		wi, err := client.ResourceV1().ResourceSlices().Watch(ctx, wopts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !nextEvent(ctx, wi) {
			t.Fatalf("%s: not within %v; %d slices now", what, timeout, len(list.Items))
		}
	}
}

// nextEvent waits for one event; false when ctx ended first.
func nextEvent(ctx context.Context, wi watch.Interface) bool {
	defer wi.Stop()
	select {
	case _, ok := <-wi.ResultChan():
		return ok || ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
