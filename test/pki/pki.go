// Package pki issues the certificates of the Kubernetes control planes
// hwnet's tests run (test/kubeapi, test/e2e/cluster): a CA and the
// certificates it signs, all ECDSA P-256.
package pki

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
	"time"
)

// notBeforeSlack covers clock steps between generation and use.
const notBeforeSlack = time.Hour

// KeyPair is a certificate with its key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// CA signs certificates valid for its lifetime.
type CA struct {
	KeyPair
	lifetime time.Duration
}

// NewCA returns a self-signed CA named name whose certificates, its own
// included, are valid for lifetime.
func NewCA(name string, lifetime time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	cert, err := sign(template, template, key.Public(), key, lifetime)
	if err != nil {
		return nil, err
	}
	return &CA{KeyPair: KeyPair{Cert: cert, Key: key}, lifetime: lifetime}, nil
}

// Issue signs template for a new key.
func (ca *CA) Issue(template *x509.Certificate) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate key for %s: %w", template.Subject.CommonName, err)
	}
	template.KeyUsage = x509.KeyUsageDigitalSignature
	cert, err := sign(template, ca.Cert, key.Public(), ca.Key, ca.lifetime)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Cert: cert, Key: key}, nil
}

func sign(template, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer, lifetime time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-notBeforeSlack)
	template.NotAfter = time.Now().Add(lifetime)
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %s: %w", template.Subject.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

// CertPEM is the certificate, PEM-encoded.
func (k KeyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.Cert.Raw})
}

// KeyPEM is the key, PEM-encoded.
func (k KeyPair) KeyPEM() ([]byte, error) {
	return KeyPEM(k.Key)
}

// KeyPEM encodes an ECDSA key, such as a service account signing key.
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
