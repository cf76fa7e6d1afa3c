package kubeapi

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

var nadCRDPath = filepath.Join("..", "..", "deploy", "crds", "network-attachment-definition.yaml")

const bridgeConfig = `{"cniVersion":"1.0.0","name":"a-bridge-network","type":"bridge","bridge":"br0"}`

// startWithNADs starts a server with namespace ns and the NAD CRD applied.
func startWithNADs(t *testing.T, ns string) (*Server, nadclient.Interface) {
	t.Helper()
	s := Start(t)
	s.CreateNamespace(t, ns)
	s.ApplyCRD(t, nadCRDPath)
	nads, err := nadclient.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return s, nads
}

func createNAD(t *testing.T, nads nadclient.Interface, ns, name, config string) {
	t.Helper()
	nad := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
	if _, err := nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(context.Background(), nad, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkAttachmentDefinition %s/%s: %v", ns, name, err)
	}
}

func getNADConfig(ctx context.Context, nads nadclient.Interface, ns, name string) (string, error) {
	nad, err := nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return nad.Spec.Config, nil
}

func TestSpec3_1_NetworkAttachmentDefinitionCRD(t *testing.T) {
	s, nads := startWithNADs(t, "blue")
	ctx := context.Background()

	crds, err := apiextensions.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "network-attachment-definitions.k8s.cni.cncf.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := crd.Status.AcceptedNames
	if crd.Spec.Group != "k8s.cni.cncf.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped ||
		names.Kind != "NetworkAttachmentDefinition" || names.Plural != "network-attachment-definitions" ||
		names.Singular != "network-attachment-definition" || !slices.Equal(names.ShortNames, []string{"net-attach-def", "nad"}) {
		t.Errorf("3.1: CRD group %q scope %q accepted names %+v, want k8s.cni.cncf.io, Namespaced, NetworkAttachmentDefinition/network-attachment-definitions, short names net-attach-def and nad as Multus's",
			crd.Spec.Group, crd.Spec.Scope, names)
	}

	t.Run("3.2.1 config round trip through the NAD clientset", func(t *testing.T) {
		createNAD(t, nads, "blue", "a-bridge-network", bridgeConfig)
		got, err := getNADConfig(ctx, nads, "blue", "a-bridge-network")
		if err != nil {
			t.Fatal(err)
		}
		if got != bridgeConfig {
			t.Errorf("spec.config = %q, want %q", got, bridgeConfig)
		}
	})
	t.Run("3.2.4 object without spec.config", func(t *testing.T) {
		createNAD(t, nads, "blue", "implementation-known", "")
	})
	t.Run("3.2 unknown spec fields are preserved", func(t *testing.T) {
		client, err := dynamic.NewForConfig(s.Config())
		if err != nil {
			t.Fatal(err)
		}
		resource := schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("k8s.cni.cncf.io/v1")
		obj.SetKind("NetworkAttachmentDefinition")
		obj.SetName("with-extra")
		if err := unstructured.SetNestedField(obj.Object, "other-implementation", "spec", "vendorField"); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Resource(resource).Namespace("blue").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := client.Resource(resource).Namespace("blue").Get(ctx, "with-extra", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(got.Object, "spec", "vendorField"); v != "other-implementation" {
			t.Errorf("spec.vendorField = %q after a round trip, want %q", v, "other-implementation")
		}
	})
	t.Run("3.1 spec.config must be a string", func(t *testing.T) {
		body := []byte(`{"apiVersion":"k8s.cni.cncf.io/v1","kind":"NetworkAttachmentDefinition","metadata":{"name":"bad"},"spec":{"config":{"type":"bridge"}}}`)
		err := nads.K8sCniCncfIoV1().RESTClient().Post().Namespace("blue").Resource("network-attachment-definitions").
			Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		if !apierrors.IsInvalid(err) {
			t.Errorf("creating an object with an object spec.config gave %v, want a validation error", err)
		}
	})
}

func TestStopRestart(t *testing.T) {
	s, nads := startWithNADs(t, "red")
	createNAD(t, nads, "red", "survivor", bridgeConfig)
	ctx := context.Background()

	s.Stop(t)
	if _, err := getNADConfig(ctx, nads, "red", "survivor"); err == nil {
		t.Fatal("a GET succeeded while kube-apiserver was stopped")
	}
	s.Restart(t)
	got, err := getNADConfig(ctx, nads, "red", "survivor")
	if err != nil {
		t.Fatalf("GET after Restart: %v", err)
	}
	if got != bridgeConfig {
		t.Errorf("spec.config after Restart = %q, want %q", got, bridgeConfig)
	}
}

func TestCountRequests(t *testing.T) {
	s, nads := startWithNADs(t, "green")
	createNAD(t, nads, "green", "counted", bridgeConfig)
	ctx := context.Background()
	cfg, counter := CountRequests(s.Config())
	counted, err := nadclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := getNADConfig(ctx, counted, "green", "counted"); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"annotations":{"hwnet.io/seen":"yes"}}}`)
	if _, err := counted.K8sCniCncfIoV1().NetworkAttachmentDefinitions("green").Patch(ctx, "counted", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := counted.K8sCniCncfIoV1().NetworkAttachmentDefinitions("green").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"GET network-attachment-definitions":   1,
		"PATCH network-attachment-definitions": 1,
		"LIST network-attachment-definitions":  1,
	}
	if got := counter.Snapshot(); !maps.Equal(got, want) {
		t.Errorf("counts = %v, want %v", got, want)
	}
	// The original configuration must stay uncounted.
	if _, err := getNADConfig(ctx, nads, "green", "counted"); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	if got := counter.Snapshot(); len(got) != 0 {
		t.Errorf("counts after Reset = %v, want none", got)
	}
}

// TestNothingLeftBehind checks that a test's servers are gone once its
// cleanup ran.
func TestNothingLeftBehind(t *testing.T) {
	Binaries(t) // skips or fails here, as every other test of this package
	var pids []int
	if !t.Run("server", func(t *testing.T) {
		s := Start(t)
		pids = []int{s.apiserver.cmd.Process.Pid, s.etcd.cmd.Process.Pid}
	}) {
		t.Fatal("the server did not start")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after cleanup (kill 0: %v)", pid, err)
		}
	}
}

// TestBinariesSkipsOrFails runs Binaries in a child test process with an
// empty cache directory: without HWNET_REQUIRE_* it skips, with either it
// fails, and both times it names the build command.
func TestBinariesSkipsOrFails(t *testing.T) {
	tests := []struct {
		name     string
		env      []string
		wantLine string
	}{
		{"optional", nil, "--- SKIP: TestBinariesHelper"},
		{"HWNET_REQUIRE_KUBE", []string{"HWNET_REQUIRE_KUBE=1"}, "--- FAIL: TestBinariesHelper"},
		{"HWNET_REQUIRE_ROOT", []string{"HWNET_REQUIRE_ROOT=1"}, "--- FAIL: TestBinariesHelper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBinariesHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "HWNET_KUBEAPI_HELPER=1", "HWNET_KUBE_CACHE="+t.TempDir(),
				"HWNET_REQUIRE_KUBE=", "HWNET_REQUIRE_ROOT=")
			cmd.Env = append(cmd.Env, tt.env...)
			out, _ := cmd.CombinedOutput()
			for _, want := range []string{tt.wantLine, "build-kube.sh " + KubeVersion} {
				if !strings.Contains(string(out), want) {
					t.Errorf("child test output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestBinariesHelper(t *testing.T) {
	if os.Getenv("HWNET_KUBEAPI_HELPER") != "1" {
		// skip-ok: a helper process, run with the variable set by TestBinariesSkipsOrFails
		t.Skip("run by TestBinariesSkipsOrFails")
	}
	Binaries(t)
}

// BenchmarkStart measures how long a test waits for a ready server: etcd
// and kube-apiserver start, /readyz ok.
func BenchmarkStart(b *testing.B) {
	bin := Binaries(b)
	for b.Loop() {
		s, err := launch(bin, b.TempDir())
		if s != nil {
			err = errors.Join(err, s.shutdown())
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestPortTaken: a server that failed because its port was taken, as its
// log says, is told apart so that Start tries again on other ports.
func TestPortTaken(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, log string
		err       error
		taken     bool
	}{
		{"bind failed", `err="failed to listen on 127.0.0.1:37685: bind: address already in use"`, errors.New("exited early"), true},
		{"other failure", `err="etcd unreachable"`, errors.New("exited early"), false},
		{"ready", `address already in use`, nil, false},
	} {
		path := filepath.Join(dir, tt.name)
		if err := os.WriteFile(path, []byte(tt.log), 0o644); err != nil {
			t.Fatal(err)
		}
		err := portTaken(tt.err, path)
		if errors.Is(err, errPortTaken) != tt.taken || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: %v, want port taken %v", tt.name, err, tt.taken)
		}
	}
}
