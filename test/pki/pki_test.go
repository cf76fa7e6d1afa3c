package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"
	"time"
)

// What the CA issues verifies against it, for the names and the use the
// template gives, within the CA's lifetime only.
func TestIssueVerifies(t *testing.T) {
	ca, err := NewCA("test-ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(serving.CertPEM())
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tests := []struct {
		name  string
		opts  x509.VerifyOptions
		valid bool
	}{
		{"serving its IP now", x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.1"}, true},
		{"another name", x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.2"}, false},
		{"as a client", x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, false},
		{"after the lifetime", x509.VerifyOptions{Roots: roots, CurrentTime: time.Now().Add(25 * time.Hour)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := cert.Verify(tt.opts); (err == nil) != tt.valid {
				t.Fatalf("Verify = %v, want valid %v", err, tt.valid)
			}
		})
	}
	if key, err := serving.KeyPEM(); err != nil || len(key) == 0 {
		t.Fatalf("KeyPEM = %q, %v", key, err)
	}
}
