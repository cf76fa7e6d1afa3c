package kubeclient_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
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
