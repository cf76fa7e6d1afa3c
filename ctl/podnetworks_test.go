package ctl

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/test/multinetapi"
)

// TestPodNetworksShowsWhoUsesEachNetwork: pods naming a network, pods
// through an attachment and pods with no references (the default network)
// are counted by the KEP's in-use rule.
func TestPodNetworksShowsWhoUsesEachNetwork(t *testing.T) {
	api := multinetapi.Start(t)
	dyn := dynamic.NewForConfigOrDie(api.Config())
	ctx := context.Background()
	for _, obj := range []any{
		&mnv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: mnv1.DefaultPodNetwork}},
		&mnv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "dataplane"}, Spec: mnv1.PodNetworkSpec{Provider: mnv1.Provider}},
		&mnv1.PodNetworkAttachment{ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: "default"}, Spec: mnv1.PodNetworkAttachmentSpec{PodNetworkName: "dataplane"}},
	} {
		createTyped(t, dyn, obj)
	}
	for name, networks := range map[string]string{"by-name": `[{"name":"dataplane"}]`, "via-pna": `[{"attachmentName":"fast"}]`, "plain": ""} {
		if _, err := api.Client().CoreV1().Pods("default").Create(ctx, multinetapi.Pod(name, networks), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	views, err := podNetworkViews(ctx, api.Client(), dyn)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := renderPodNetworks(&out, views); err != nil {
		t.Fatal(err)
	}
	// Columns are aligned per block; compare words.
	text := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"pod: default/by-name", "pod: default/via-pna via fast", "attachment: default/fast", "pod: default/plain"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(text, "dataplane true - - hwnet.io/cni 1 2") {
		t.Errorf("dataplane's row does not count 1 attachment and 2 pods:\n%s", out.String())
	}
}

func createTyped(t *testing.T, dyn dynamic.Interface, obj any) {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *mnv1.PodNetwork:
		o.APIVersion, o.Kind = mnv1.Group+"/"+mnv1.Version, "PodNetwork"
		u, _ := mnv1.ToUnstructured(o)
		_, err = dyn.Resource(mnv1.PodNetworkResource).Create(context.Background(), u, metav1.CreateOptions{})
	case *mnv1.PodNetworkAttachment:
		o.APIVersion, o.Kind = mnv1.Group+"/"+mnv1.Version, "PodNetworkAttachment"
		u, _ := mnv1.ToUnstructured(o)
		_, err = dyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace(o.Namespace).Create(context.Background(), u, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}
