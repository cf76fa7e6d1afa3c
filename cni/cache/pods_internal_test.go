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
