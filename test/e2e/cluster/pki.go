package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hwnet-io/hwnet/test/pki"
)

// certLifetime covers a cluster left running for a long time.
const certLifetime = 365 * 24 * time.Hour

// serviceCIDR is the service range; its first address, serviceIP, is the
// kubernetes Service's ClusterIP.
const (
	serviceCIDR = "10.0.0.0/24"
	serviceIP   = "10.0.0.1"
)

// apiserverPort is kube-apiserver's secure port, the kubernetes Service's
// port, so that in-cluster clients reach it without kube-proxy.
const apiserverPort = 443

// writePKI generates the cluster's CA, the certificates of kube-apiserver
// (serving, and as kubelet's client), the service account signing key, and
// the admin's and kubelet's kubeconfigs, the latter also for each of the
// workers (see workerKubeconfig), whose nodes copy theirs.
func writePKI(p paths, nodeName string, nodeIP net.IP, workers []string) error {
	ca, err := pki.NewCA("hwnet-e2e-ca", certLifetime)
	if err != nil {
		return err
	}
	if err := writePEM(p.pkiFile("ca.crt"), ca.CertPEM()); err != nil {
		return err
	}
	if err := writeIssued(p, ca, "apiserver", servingTemplate(nodeIP)); err != nil {
		return err
	}
	if err := writeIssued(p, ca, "apiserver-kubelet-client", clientTemplate("kube-apiserver-kubelet-client", "system:masters")); err != nil {
		return err
	}
	if err := writeServiceAccountKey(p.pkiFile("service-account.key")); err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s", net.JoinHostPort(nodeIP.String(), fmt.Sprint(apiserverPort)))
	users := []struct{ file, user, group string }{
		{p.kubeconfig("admin"), "hwnet-e2e-admin", "system:masters"},
		{p.kubeconfig("kubelet"), "system:node:" + nodeName, "system:nodes"},
	}
	for _, name := range workers {
		users = append(users, struct{ file, user, group string }{
			p.workerKubeconfig(name), "system:node:" + name, "system:nodes"})
	}
	for _, u := range users {
		pair, err := ca.Issue(clientTemplate(u.user, u.group))
		if err != nil {
			return err
		}
		if err := writeKubeconfig(u.file, server, ca.Cert, pair); err != nil {
			return err
		}
	}
	return nil
}

func servingTemplate(nodeIP net.IP) *x509.Certificate {
	return &x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(serviceIP), nodeIP},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

func clientTemplate(user, group string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: []string{group}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// writeIssued issues template and writes NAME.crt and NAME.key.
func writeIssued(p paths, ca *pki.CA, name string, template *x509.Certificate) error {
	pair, err := ca.Issue(template)
	if err != nil {
		return err
	}
	key, err := pair.KeyPEM()
	if err != nil {
		return err
	}
	if err := writePEM(p.pkiFile(name+".crt"), pair.CertPEM()); err != nil {
		return err
	}
	return writePEM(p.pkiFile(name+".key"), key)
}

func writeServiceAccountKey(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	data, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	return writePEM(path, data)
}

func writePEM(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for the certificate's user.
func writeKubeconfig(path, server string, ca *x509.Certificate, user pki.KeyPair) error {
	key, err := user.KeyPEM()
	if err != nil {
		return err
	}
	const name = "hwnet-e2e"
	config := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {Server: server, CertificateAuthorityData: pki.KeyPair{Cert: ca}.CertPEM()}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			user.Cert.Subject.CommonName: {ClientCertificateData: user.CertPEM(), ClientKeyData: key},
		},
		Contexts: map[string]*clientcmdapi.Context{
			name: {Cluster: name, AuthInfo: user.Cert.Subject.CommonName},
		},
		CurrentContext: name,
	}
	if err := clientcmd.WriteToFile(config, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
