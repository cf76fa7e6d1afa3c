package kubeclient_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// TestRESTConfig checks the configuration RESTConfig builds from a
// kubeconfig file serves both built-in objects (as protobuf) and the
// NetworkAttachmentDefinition custom resource (as JSON), fast enough to
// patch a node's pods as they all start.
func TestRESTConfig(t *testing.T) {
	kubeapi.Binaries(t)
	s := kubeapi.Start(t)
	s.ApplyCRD(t, "../../deploy/crds/network-attachment-definition.yaml")
	cfg, err := kubeclient.RESTConfig(writeKubeconfig(t, s.Config()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS < 20 || cfg.Burst < 40 {
		t.Errorf("QPS %v, burst %d: too low to patch a node's pods as they start", cfg.QPS, cfg.Burst)
	}
	if !strings.HasPrefix(cfg.AcceptContentTypes, "application/vnd.kubernetes.protobuf") {
		t.Errorf("accepts %q: want protobuf first", cfg.AcceptContentTypes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("pods through RESTConfig's client: %v", err)
	}
	nads := nadclient.NewForConfigOrDie(cfg).K8sCniCncfIoV1().NetworkAttachmentDefinitions("default")
	if _, err := nads.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("NADs through RESTConfig's client: %v", err)
	}
	watchUncompressed(ctx, t, cfg)
}

// watchUncompressed checks a watch through cfg's transport, in the
// streaming form client-go's informers use (sendInitialEvents), comes as
// the API server writes it, not gzipped: Go's transport would ask for gzip
// and inflate it unseen (Response.Uncompressed), and an idle agent's
// watches paid a gzip stream each, on both ends, for their bookmarks.
func watchUncompressed(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: "default"}}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, err := io.ReadAll(resp.Body); err != nil || !strings.Contains(string(body), "watched") {
		t.Fatalf("a watch through RESTConfig's transport: %v, %q; want the ConfigMap's event", err, body)
	}
	if resp.StatusCode != http.StatusOK || resp.Uncompressed || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("a watch through RESTConfig's transport: status %d, inflated by the transport %t, Content-Encoding %q; want 200, uncompressed",
			resp.StatusCode, resp.Uncompressed, resp.Header.Get("Content-Encoding"))
	}
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRESTConfigErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	tests := []struct {
		name       string
		kubeconfig string
		want       string
	}{
		{"missing kubeconfig file", missing, missing},
		{"no kubeconfig outside a cluster", "", rest.ErrNotInCluster.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := kubeclient.RESTConfig(tt.kubeconfig); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RESTConfig(%q) error = %v, want one saying %q", tt.kubeconfig, err, tt.want)
			}
		})
	}
}
