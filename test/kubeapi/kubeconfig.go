package kubeapi

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes the admin's client configuration as a kubeconfig
// file in dir and returns its path, for a component the test runs as its
// own process, as users run it.
func (s *Server) WriteKubeconfig(t testing.TB, dir string) string {
	t.Helper()
	cfg := s.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubeapi"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "kubeapi", AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
