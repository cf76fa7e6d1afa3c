package cache

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestOnNodeWatchIsQuiet: every request of the pods informer selects the
// node's pods; the watch that streams the first list keeps the bookmark
// that ends it and client-go's timeout, and a watch started again asks
// for no bookmarks and lasts 30-60 min, as a quiet kind's does.
func TestOnNodeWatchIsQuiet(t *testing.T) {
	for _, tt := range []struct {
		name          string
		in            metav1.ListOptions
		wantBookmarks bool
		wantTimeout   int64
	}{
		{"list", metav1.ListOptions{}, false, 0},
		{"the watch that streams the list", metav1.ListOptions{Watch: true, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](420)}, true, 420},
		{"the watch started again", metav1.ListOptions{Watch: true, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](420)}, false, 2520},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.in
			onNode("worker-1")(&o)
			if o.FieldSelector != "spec.nodeName=worker-1" {
				t.Errorf("field selector %q, want spec.nodeName=worker-1", o.FieldSelector)
			}
			if o.AllowWatchBookmarks != tt.wantBookmarks {
				t.Errorf("allowWatchBookmarks %v, want %v", o.AllowWatchBookmarks, tt.wantBookmarks)
			}
			var got int64
			if o.TimeoutSeconds != nil {
				got = *o.TimeoutSeconds
			}
			if got != tt.wantTimeout {
				t.Errorf("timeoutSeconds %d, want %d", got, tt.wantTimeout)
			}
		})
	}
}
