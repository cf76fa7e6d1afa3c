package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// TestExplainPod: one view from the selection annotation to the Events,
// each step from where it lives: the API server, kubelet's PodResources
// and hwnet's records.
func TestExplainPod(t *testing.T) {
	api := kubeapi.Start(t)
	api.ApplyCRD(t, "../deploy/crds/network-attachment-definition.yaml")
	ctx := context.Background()
	nads, err := nadclient.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	_, err = nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions("default").Create(ctx, &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "sriov-a", Namespace: "default",
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov_netdevice"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := corev1.ResourceList{"intel.com/sriov_netdevice": resource.MustParse("1")}
	pod, err := api.Client().CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cnf", Namespace: "default", Annotations: map[string]string{
			"k8s.v1.cni.cncf.io/networks":       `[{"name":"sriov-a","interface":"net1"},{"name":"missing"}]`,
			"k8s.v1.cni.cncf.io/network-status": `[{"name":"default/sriov-a","interface":"net1","ips":["10.1.0.2"],"mac":"02:00:00:00:00:01","default":false,"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:02.0"}}}]`,
		}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "main", Image: "none",
			Resources: corev1.ResourceRequirements{Limits: res, Requests: res}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.Client().CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "cnf.1", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "cnf", UID: pod.UID},
		Type:           corev1.EventTypeWarning, Reason: "FailedCreatePodSandBox", Message: "NAD default/missing not found",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.Client().CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "cnf.2", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "cnf", UID: pod.UID},
		Type:           corev1.EventTypeWarning, Reason: "FailedScheduling",
		Message: "0/3 nodes are available: 3 Insufficient intel.com/sriov_netdevice. preemption: 0/3 nodes are available",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	podres, err := testkubelet.ServePodResources(filepath.Join(dir, "pr.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer podres.Close()
	podres.SetPod("default", "cnf", "intel.com/sriov_netdevice", "0000:3b:02.0")
	cache := filepath.Join(dir, "cache")
	err = attachments.NewStore(cache).Save(&attachment.Record{ContainerID: "0123456789abcdef", PodNamespace: "default", PodName: "cnf",
		Attachments: []attachment.Attachment{{Network: "default/sriov-a", IfName: "net1", ConfList: json.RawMessage(`{}`),
			DeviceID: "0000:3b:02.0", Resource: "intel.com/sriov_netdevice"}}})
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	src := explainSources{client: api.Client(), nads: nads, podResources: filepath.Join(dir, "pr.sock"), cacheDir: cache}
	if err := explainPod(ctx, &out, src, "default", "cnf"); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"Pod default/cnf node node-1",
		"default/sriov-a interface net1 resource intel.com/sriov_netdevice",
		`default/missing interface - resource NAD:`,
		"main intel.com/sriov_netdevice=1",
		"main intel.com/sriov_netdevice 0000:3b:02.0",
		"sandbox 0123456789ab default/sriov-a net1 device intel.com/sriov_netdevice 0000:3b:02.0 ADD unfinished",
		"default/sriov-a net1 10.1.0.2 mac 02:00:00:00:00:01 device 0000:3b:02.0 default false",
		"Warning FailedCreatePodSandBox NAD default/missing not found",
		"hint: no node had a free intel.com/sriov_netdevice: on the node meant to serve it, hwnetctl doctor --config FILE says what keeps its pool empty",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explain lacks %q:\n%s", want, out.String())
		}
	}
}

// TestExplainPodNetworks: a pod referencing KEP-3698 networks shows its
// references, the gate it waits on and its PodStatus.networks.
func TestExplainPodNetworks(t *testing.T) {
	api := kubeapi.Start(t)
	api.ApplyCRD(t, "../deploy/crds/network-attachment-definition.yaml")
	ctx := context.Background()
	_, err := api.Client().CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kep", Namespace: "default", Annotations: map[string]string{
			"multinetwork.hwnet.io/networks":        `[{"name":"dataplane","interfaceName":"net1","isDefaultGW":true},{"attachmentName":"fast"}]`,
			"multinetwork.hwnet.io/networks-status": `[{"name":"dataplane","interfaceName":"net1","ip":"10.58.0.2","isDefaultGW":true}]`,
		}},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "multinetwork.hwnet.io/networks-ready"}},
			Containers: []corev1.Container{{Name: "main", Image: "none"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nads, err := nadclient.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	src := explainSources{client: api.Client(), nads: nads, podResources: filepath.Join(t.TempDir(), "none.sock"), cacheDir: t.TempDir()}
	if err := explainPod(ctx, &out, src, "default", "kep"); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"PodNetwork dataplane interface net1 default gateway true",
		"PodNetworkAttachment default/fast interface - default gateway false",
		"waiting: scheduling gate multinetwork.hwnet.io/networks-ready",
		`"ip":"10.58.0.2"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explain lacks %q:\n%s", want, out.String())
		}
	}
}
