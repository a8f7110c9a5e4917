// Package selfcert makes throw-away certificates for loopback TLS: a CA, a
// server certificate it signed, a client certificate it signed, and a
// second CA that signed neither (the "wrong CA"). Keys are ECDSA P-256,
// valid for a day; everything is written as PEM files into a directory.
// The tests use it through testcert; the bench uses it for the work
// API of its slaves.
package selfcert

import (
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

// Files are the paths of the PEM files Make made.
type Files struct {
	CA         string // the CA that signed the server and client certificates
	ServerCert string // the server's certificate, for the names given to Make
	ServerKey  string
	ClientCert string // a client certificate (CN redcrawl-test-client)
	ClientKey  string
	OtherCA    string // a CA that signed nothing here
	// Names are the server certificate's names, as given to Make.
	Names []string
}

// ServerName is the server certificate's first name.
func (f Files) ServerName() string { return f.Names[0] }

// Make makes the certificates into dir. names are the server
// certificate's DNS names and IP addresses (127.0.0.1, localhost,
// redis.test); none gives 127.0.0.1 and localhost.
func Make(dir string, names ...string) (Files, error) {
	if len(names) == 0 {
		names = []string{"127.0.0.1", "localhost"}
	}
	f := Files{
		CA: filepath.Join(dir, "ca.pem"), OtherCA: filepath.Join(dir, "other-ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
		Names: names,
	}
	caKey, caCert, err := newCA("redcrawl test CA")
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caCert.Raw); err != nil {
		return f, err
	}
	_, other, err := newCA("redcrawl other CA")
	if err != nil {
		return f, err
	}
	if err := writePEM(f.OtherCA, "CERTIFICATE", other.Raw); err != nil {
		return f, err
	}
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
	if err := issue(server, caCert, caKey, f.ServerCert, f.ServerKey); err != nil {
		return f, err
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "redcrawl-test-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return f, issue(client, caCert, caKey, f.ClientCert, f.ClientKey)
}

func template(tmpl *x509.Certificate) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("selfcert: serial: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
	return tmpl, nil
}

func newCA(name string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("selfcert: key: %w", err)
	}
	tmpl, err := template(&x509.Certificate{
		Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	})
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("selfcert: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("selfcert: CA: %w", err)
	}
	return key, cert, nil
}

func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("selfcert: key: %w", err)
	}
	if tmpl, err = template(tmpl); err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("selfcert: certificate: %w", err)
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("selfcert: key: %w", err)
	}
	return writePEM(keyPath, "PRIVATE KEY", kder)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("selfcert: %w", err)
	}
	return nil
}
