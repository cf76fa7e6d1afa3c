package kubeapi

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// credentials are the files kube-apiserver reads and the PEM blocks a client
// needs. The admin client authenticates with an x509 certificate in group
// system:masters, which kube-apiserver's RBAC authorizer lets do anything
// without any RoleBinding.
type credentials struct {
	caFile, servingCertFile, servingKeyFile, serviceAccountKeyFile string
	caPEM, adminCertPEM, adminKeyPEM                               []byte
}

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// writeCredentials generates a CA, a serving certificate for 127.0.0.1 and
// localhost, an admin client certificate and a service account signing key
// in dir.
func writeCredentials(dir string) (*credentials, error) {
	ca, err := newCA()
	if err != nil {
		return nil, err
	}
	serving, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	admin, err := ca.issue(&x509.Certificate{
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
		caPEM:                 certPEM(ca.cert),
		adminCertPEM:          certPEM(admin.cert),
	}
	if creds.adminKeyPEM, err = keyPEM(admin.key); err != nil {
		return nil, err
	}
	return creds, creds.write(serving, serviceAccountKey)
}

func (c *credentials) write(serving keyPair, serviceAccountKey *ecdsa.PrivateKey) error {
	servingKey, err := keyPEM(serving.key)
	if err != nil {
		return err
	}
	serviceAccount, err := keyPEM(serviceAccountKey)
	if err != nil {
		return err
	}
	files := []struct {
		path string
		data []byte
	}{
		{c.caFile, c.caPEM},
		{c.servingCertFile, certPEM(serving.cert)},
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

func newCA() (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generate CA key: %w", err)
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "hwnet-kubeapi-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	cert, err := sign(template, template, key.Public(), key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: cert, key: key}, nil
}

// issue signs template for a new key with the CA.
func (ca keyPair) issue(template *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generate key for %s: %w", template.Subject.CommonName, err)
	}
	template.KeyUsage = x509.KeyUsageDigitalSignature
	cert, err := sign(template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: cert, key: key}, nil
}

func sign(template, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	template.SerialNumber = serial
	// An hour of slack covers clock steps between generation and use.
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %s: %w", template.Subject.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

func certPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
