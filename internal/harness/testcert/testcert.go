// Package testcert makes the certificates of TLS tests: a CA, a server
// certificate it signed, a client certificate it signed, and a second CA
// that signed neither (the "wrong CA"). Keys are ECDSA P-256; everything is
// written as PEM files into a directory of the test's.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the paths of the PEM files Write made.
type Files struct {
	CA         string // the CA that signed the server and client certificates
	ServerCert string // the server's certificate, for the names given to Write
	ServerKey  string
	ClientCert string // a client certificate (CN redcrawl-test-client)
	ClientKey  string
	OtherCA    string // a CA that signed nothing here
	// Names are the server certificate's names, as given to Write.
	Names []string
}

// ServerName is the server certificate's first name.
func (f Files) ServerName() string { return f.Names[0] }

// Write makes the certificates into dir. names are the server
// certificate's DNS names and IP addresses (127.0.0.1, localhost,
// redis.test); none gives 127.0.0.1 and localhost.
func Write(t testing.TB, dir string, names ...string) Files {
	t.Helper()
	if len(names) == 0 {
		names = []string{"127.0.0.1", "localhost"}
	}
	f := Files{
		CA: filepath.Join(dir, "ca.pem"), OtherCA: filepath.Join(dir, "other-ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
		Names: names,
	}
	caKey, caCert := newCA(t, "redcrawl test CA")
	writePEM(t, f.CA, "CERTIFICATE", caCert.Raw)
	_, other := newCA(t, "redcrawl other CA")
	writePEM(t, f.OtherCA, "CERTIFICATE", other.Raw)

	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, n)
		}
	}
	issue(t, server, caCert, caKey, f.ServerCert, f.ServerKey)
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "redcrawl-test-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	issue(t, client, caCert, caKey, f.ClientCert, f.ClientKey)
	return f
}

func template(t testing.TB, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
	return tmpl
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newCA(t testing.TB, name string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func issue(t testing.TB, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, template(t, tmpl), ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certPath, "CERTIFICATE", der)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyPath, "PRIVATE KEY", kder)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
