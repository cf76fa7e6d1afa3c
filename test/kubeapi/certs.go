package kubeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hwnet-io/hwnet/test/pki"
)

// certLifetime covers the longest test run.
const certLifetime = 24 * time.Hour

// credentials are the files kube-apiserver reads and the PEM blocks a client
// needs. The admin client authenticates with an x509 certificate in group
// system:masters, which kube-apiserver's RBAC authorizer lets do anything
// without any RoleBinding.
type credentials struct {
	caFile, servingCertFile, servingKeyFile, serviceAccountKeyFile string
	caPEM, adminCertPEM, adminKeyPEM                               []byte
}

// writeCredentials generates a CA, a serving certificate for 127.0.0.1 and
// localhost, an admin client certificate and a service account signing key
// in dir.
func writeCredentials(dir string) (*credentials, error) {
	ca, err := pki.NewCA("hwnet-kubeapi-ca", certLifetime)
	if err != nil {
		return nil, err
	}
	serving, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	admin, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubeapi-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	serviceAccountKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	creds := &credentials{
		caFile:                filepath.Join(dir, "ca.crt"),
		servingCertFile:       filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:        filepath.Join(dir, "apiserver.key"),
		serviceAccountKeyFile: filepath.Join(dir, "service-account.key"),
		caPEM:                 ca.CertPEM(),
		adminCertPEM:          admin.CertPEM(),
	}
	if creds.adminKeyPEM, err = admin.KeyPEM(); err != nil {
		return nil, err
	}
	return creds, creds.write(serving, serviceAccountKey)
}

func (c *credentials) write(serving pki.KeyPair, serviceAccountKey *ecdsa.PrivateKey) error {
	servingKey, err := serving.KeyPEM()
	if err != nil {
		return err
	}
	serviceAccount, err := pki.KeyPEM(serviceAccountKey)
	if err != nil {
		return err
	}
	files := []struct {
		path string
		data []byte
	}{
		{c.caFile, c.caPEM},
		{c.servingCertFile, serving.CertPEM()},
		{c.servingKeyFile, servingKey},
		{c.serviceAccountKeyFile, serviceAccount},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return fmt.Errorf("write credentials: %w", err)
		}
	}
	return nil
}
