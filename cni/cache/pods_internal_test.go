package cache

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecodePod feeds kubelet's watch events arbitrary bytes: a pod that
// does not decode must be an error, never a panic, and one that decodes
// must name a pod.
func FuzzDecodePod(f *testing.F) {
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ran", Name: "du-0", UID: "u0",
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "fronthaul"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ran", Name: "no-uid"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "u"}, Spec: corev1.PodSpec{NodeName: "node-a"}},
	} {
		b, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePod(b)
		if err == nil && p.UID == "" {
			t.Errorf("decodePod(%x) = %+v with no UID and no error", b, p)
		}
	})
}

// BenchmarkPodLookup measures a CNI ADD's pod lookup on a busy node.
func BenchmarkPodLookup(b *testing.B) {
	const pods = 250
	c := newPodCache()
	for i := range pods {
		c.set(Pod{Namespace: "ran", Name: fmt.Sprintf("du-%d", i), UID: fmt.Sprintf("uid-%d", i),
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "fronthaul,midhaul"}})
	}
	for _, bc := range []struct {
		name string
		ref  PodRef
	}{
		{"by UID", PodRef{Namespace: "ran", Name: "du-200", UID: "uid-200"}},
		{"by name, no UID", PodRef{Namespace: "ran", Name: "du-200"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.wait(ctx, bc.ref, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRunningAndUIDOf: the ledger's two questions to the node's pods. A
// pod runs until its phase says it ended; two pods of one name (the old
// one terminating beside its namesake) have no one UID.
func TestRunningAndUIDOf(t *testing.T) {
	c := newPodCache()
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "u-old"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "u-job"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	c.set(podFrom(running))
	c.set(podFrom(done))
	for _, tc := range []struct {
		name, uid string
		want      bool
	}{{"web-0", "", true}, {"web-0", "u-old", true}, {"web-0", "u-new", false}, {"job", "", false}, {"gone", "", false}} {
		if got := c.running("ns", tc.name, tc.uid); got != tc.want {
			t.Errorf("running(%s, %q) = %t, want %t", tc.name, tc.uid, got, tc.want)
		}
	}
	if uid := c.uidOf("ns", "web-0"); uid != "u-old" {
		t.Errorf("uidOf web-0 = %q, want u-old", uid)
	}
	c.set(Pod{Namespace: "ns", Name: "web-0", UID: "u-new"})
	if uid := c.uidOf("ns", "web-0"); uid != "" {
		t.Errorf("uidOf with two web-0 = %q, want none", uid)
	}
}
