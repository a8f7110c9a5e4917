package deploy_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// writePEM writes one PEM block to dir/name and returns the path.
func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testCA makes a CA and a server certificate for 127.0.0.1 in dir and
// returns the paths of the CA certificate, the server certificate and its
// key, and a pool holding the CA.
func testCA(t *testing.T, dir string) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redcrawl test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "redis.test"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return writePEM(t, dir, "ca.crt", "CERTIFICATE", caDER),
		writePEM(t, dir, "redis.crt", "CERTIFICATE", der),
		writePEM(t, dir, "redis.key", "PRIVATE KEY", keyDER), pool
}

// readmeCerts runs the certificate commands of docs/deploy.md step 3 (its
// first code block, with 127.0.0.1 for the server's LAN address) in dir
// and returns the CA and the Redis certificate they make. Without openssl
// it falls back to testCA and says so.
func readmeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Log("openssl not found in PATH: docs/deploy.md step 3 is not run, the test makes its own certificates")
		return testCA(t, dir)
	}
	readme, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, step, ok := strings.Cut(string(readme), "**3. TLS certificates.**")
	if !ok {
		t.Fatal(`docs/deploy.md has no "**3. TLS certificates.**" step`)
	}
	_, block, ok := strings.Cut(step, "```sh\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok || !strings.Contains(block, "openssl") {
		t.Fatalf("docs/deploy.md step 3 has no sh code block of openssl commands")
	}
	block = strings.ReplaceAll(block, "10.0.0.5", "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/deploy.md step 3:\n%s\n%v\n%s", block, err, out)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("docs/deploy.md step 3: ca.crt holds no certificate")
	}
	return filepath.Join(dir, "ca.crt"), filepath.Join(dir, "redis.crt"), filepath.Join(dir, "redis.key"), pool
}

// TestRedisSnippet starts the real redis-server with deploy/redis/redcrawl.conf
// included as docs/deploy.md says, and users.acl.example as its ACL file,
// overriding only the host-specific lines (the LAN address, the certificate
// paths, the ACL file, the data directory) with loopback and temporary ones.
// It checks that the server takes the file, serves TLS only, refuses the
// default user and runs with the durability and memory settings the
// snippet documents.
func TestRedisSnippet(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not found in PATH: the Redis snippet test needs it (apt-get install redis-server)")
	}
	snippet, err := filepath.Abs(filepath.Join("redis", "redcrawl.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, certFile, keyFile, pool := readmeCerts(t, dir)

	const opsPassword = "ops-test-password"
	acl, err := os.ReadFile(filepath.Join("redis", "users.acl.example"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(opsPassword))
	placeholder := "#" + strings.Repeat("0", 64)
	if !strings.Contains(string(acl), placeholder) {
		t.Fatalf("users.acl.example has no %s placeholder for the ops password", placeholder)
	}
	aclFile := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclFile, []byte(strings.Replace(string(acl), placeholder, "#"+hex.EncodeToString(sum[:]), 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	tlsConf := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	opsClient := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Username: "ops", Password: opsPassword, TLSConfig: tlsConf, MaxRetries: -1})
	}
	srv := testutil.StartServer(t, testutil.ServerOptions{Name: "redis-server",
		Args: func(srv *testutil.Server) []string {
			// later lines win: only the host-specific ones are replaced
			conf := fmt.Sprintf(`include %s
bind 127.0.0.1
tls-port %d
tls-cert-file %s
tls-key-file %s
tls-ca-cert-file %s
aclfile %s
dir %s
logfile %s
daemonize no
`, snippet, srv.Port, certFile, keyFile, caFile, aclFile, srv.Dir, srv.Log)
			confFile := filepath.Join(srv.Dir, "redis.conf")
			if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{confFile}
		},
		Ready: func(ctx context.Context, srv *testutil.Server) error {
			ops := opsClient(srv.Addr)
			defer ops.Close()
			return ops.Ping(ctx).Err()
		},
	})
	ops := opsClient(srv.Addr)
	t.Cleanup(func() { ops.Close() })
	checkRedis(t, ops, srv.Addr, tlsConf)
}

func checkRedis(t *testing.T, ops *redis.Client, addr string, tlsConf *tls.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[string]string{
		"appendonly":       "yes",
		"appendfsync":      "everysec",
		"maxmemory-policy": "noeviction",
		"maxmemory":        strconv.Itoa(4 << 30),
		"port":             "0",
		"tls-auth-clients": "no",
		"tls-protocols":    "TLSv1.2 TLSv1.3",
		"protected-mode":   "yes",
	}
	got := map[string]string{}
	for k := range want {
		m, err := ops.ConfigGet(ctx, k).Result()
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", k, err)
		}
		got[k] = m[k]
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("CONFIG GET (-want +got):\n%s", d)
	}

	// the default user is off: a client without a user is refused
	anon := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tlsConf, MaxRetries: -1})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without a user: %v, want a NOAUTH error (user default off)", err)
	}
	// the tls port does not speak plain text
	plain := redis.NewClient(&redis.Options{Addr: addr, Username: "ops", Password: "x", MaxRetries: -1,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Errorf("a plain-text PING on the TLS port succeeded")
	}
	// ACL LOAD re-reads the file, as docs/deploy.md does after appending users
	if err := ops.Do(ctx, "ACL", "LOAD").Err(); err != nil {
		t.Errorf("ACL LOAD: %v", err)
	}
}

// TestMariaDBSnippet has mariadbd read deploy/mariadb/redcrawl.cnf (an
// unknown or misspelt option is an error) and checks the values it ends up
// with.
func TestMariaDBSnippet(t *testing.T) {
	bin, err := exec.LookPath("mariadbd")
	if err != nil {
		t.Skip("mariadbd not found in PATH: the MariaDB snippet test needs it (apt-get install mariadb-server)")
	}
	cnf, err := filepath.Abs(filepath.Join("mariadb", "redcrawl.cnf"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--defaults-file="+cnf, "--help", "--verbose")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mariadbd --defaults-file=%s --help --verbose: %v\n%s", cnf, err, stderr.String())
	}
	// the table after --help --verbose: "variable-name   value"
	vars := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			vars[f[0]] = f[1]
		}
	}
	want := map[string]string{
		"bind-address":                   "127.0.0.1",
		"ssl-ca":                         "/etc/mysql/tls/ca.crt",
		"ssl-cert":                       "/etc/mysql/tls/redcrawl-mysql.crt",
		"ssl-key":                        "/etc/mysql/tls/redcrawl-mysql.key",
		"tls-version":                    "TLSv1.2,TLSv1.3",
		"require-secure-transport":       "TRUE",
		"character-set-server":           "utf8mb4",
		"collation-server":               "utf8mb4_unicode_ci",
		"innodb-flush-log-at-trx-commit": "1",
		"innodb-buffer-pool-size":        strconv.Itoa(1 << 30),
		"innodb-log-file-size":           strconv.Itoa(512 << 20),
		"innodb-file-per-table":          "TRUE",
		"max-connections":                "50",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = vars[k]
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("mariadbd variables (-want +got):\n%s", d)
	}
}
