// Package testcert makes the certificates of TLS tests (selfcert, failing
// the test on an error): a CA, a server certificate it signed, a client
// certificate it signed, and a second CA that signed neither (the "wrong
// CA"), written as PEM files into a directory of the test's.
package testcert

import (
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/selfcert"
)

// Files are the paths of the PEM files Write made.
type Files = selfcert.Files

// Write makes the certificates into dir. names are the server
// certificate's DNS names and IP addresses (127.0.0.1, localhost,
// redis.test); none gives 127.0.0.1 and localhost.
func Write(t testing.TB, dir string, names ...string) Files {
	t.Helper()
	f, err := selfcert.Make(dir, names...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
