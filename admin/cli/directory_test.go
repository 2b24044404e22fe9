package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin/cli"
)

// TestDirectoryCommands: the directory verbs build the requests the admin
// API takes: --org GROUP_DN=ORG_ID with a DN full of "=", the password
// from standard input, a CA file; update keeps what it is not given.
func TestDirectoryCommands(t *testing.T) {
	c := newCLI(t)
	org := c.field("id", "", "org", "create", "--slug", "fin", "--name", "Finance")
	ca := writeFile(t, "ca.pem", selfSignedPEM(t))
	id := c.field("id", "s3cret-bind\n", "directory", "create", "--name", "Corp AD", "--url", "ldaps://dc1.corp.example:636",
		"--bind-dn", "CN=svc,DC=corp,DC=example", "--bind-password-stdin", "--user-base", "DC=corp,DC=example",
		"--user-filter", "(userPrincipalName=%s)", "--id-attribute", "objectGUID", "--group-base", "DC=corp,DC=example",
		"--group-filter", "(member=%s)", "--ca-file", ca, "--org", "CN=Finance,OU=Groups,DC=corp,DC=example="+org, "--sync-interval", "5m")
	out, _ := c.run(cli.ExitOK, "", "directory", "get", id, "--json")
	contains(t, "directory get", out, `"name": "Corp AD"`, `"group_dn": "CN=Finance,OU=Groups,DC=corp,DC=example"`, `"organization_id": "`+org+`"`,
		`"sync_interval": "5m0s"`, `"bind_password_set": true`, `"email_attribute": "mail"`, "BEGIN CERTIFICATE")
	out, _ = c.run(cli.ExitOK, "", "directory", "list")
	contains(t, "directory list", out, "Corp AD", "ldaps://dc1.corp.example:636")
	out, _ = c.run(cli.ExitOK, "", "directory", "update", id, "--sync-interval", "1h", "--json")
	contains(t, "directory update", out, `"sync_interval": "1h0m0s"`, `"bind_password_set": true`, `"name": "Corp AD"`)
	_, errOut := c.run(cli.ExitServerError, "", "directory", "update", id, "--url", "ldap://dc1:389")
	contains(t, "plain ldap refused", errOut, "url", "in the clear")
	_, errOut = c.run(cli.ExitUsage, "", "directory", "update", id, "--org", "no-equals-sign")
	contains(t, "bad --org", errOut, "GROUP_DN=ORG_ID")
	c.run(cli.ExitOK, "", "directory", "delete", id)
	out, _ = c.run(cli.ExitOK, "", "directory", "list")
	contains(t, "after delete", out, "no directories")
}

// selfSignedPEM is a CA certificate in PEM, as --ca-file takes.
func selfSignedPEM(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corp root"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
