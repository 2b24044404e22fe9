// Package ldaptest starts a real OpenLDAP server (Debian's slapd, which
// scripts/ensure-slapd.sh installs) for the directory tests: its own
// configuration and database under t.TempDir(), a CA and server
// certificate generated for 127.0.0.1, plain LDAP (for StartTLS) and LDAPS
// on loopback ports, the ppolicy overlay (so pwdAccountLockedTime locks a
// person out as it does on a real site), and the entries of an LDIF.
//
// Without slapd the test is skipped, or fails when CI is "true".
package ldaptest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/oidcd/oidcd/internal/testkit/freeport"
	"github.com/oidcd/oidcd/internal/testkit/testca"
)

// Path is Debian's slapd.
const Path = "/usr/sbin/slapd"

// Base is the suffix of the test directory; AdminDN and AdminPassword
// are its root account.
const (
	Base          = "dc=example,dc=com"
	AdminDN       = "cn=admin," + Base
	AdminPassword = "admin-secret"
)

// policyDN is the password policy every person falls under, so that
// ppolicy enforces pwdAccountLockedTime.
const policyDN = "cn=default,ou=policies," + Base

// Server is a running slapd.
type Server struct {
	t                testing.TB
	dir              string
	ldapPort, ldapsP int
	cmd              *exec.Cmd
	exited           chan struct{}
	// CAPEM is the PEM of the CA that signed the server's certificate.
	CAPEM string
	pool  *x509.CertPool
}

// Start starts slapd with the entries of ldif (the suffix entry
// dc=example,dc=com and ou=people and ou=groups under it are created
// first) and stops it at the end of the test.
func Start(t testing.TB, ldif string) *Server {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("slapd not found at %s (run scripts/ensure-slapd.sh)", Path)
		}
		t.Skipf("slapd not found at %s; run scripts/ensure-slapd.sh", Path)
	}
	s := &Server{t: t, dir: t.TempDir()}
	s.writeTLS()
	if err := os.Mkdir(filepath.Join(s.dir, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.writeConfig()
	seed := "dn: " + Base + "\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n" +
		"dn: ou=people," + Base + "\nobjectClass: organizationalUnit\nou: people\n\n" +
		"dn: ou=groups," + Base + "\nobjectClass: organizationalUnit\nou: groups\n\n" +
		"dn: ou=policies," + Base + "\nobjectClass: organizationalUnit\nou: policies\n\n" +
		"dn: " + policyDN + "\nobjectClass: device\nobjectClass: pwdPolicy\ncn: default\npwdAttribute: userPassword\npwdLockout: TRUE\n\n" + ldif
	add := exec.Command("/usr/sbin/slapadd", "-f", filepath.Join(s.dir, "slapd.conf"), "-b", Base)
	add.Stdin = strings.NewReader(seed)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the plain LDAP address (for StartTLS); LDAPSURL the TLS one.
func (s *Server) URL() string      { return fmt.Sprintf("ldap://127.0.0.1:%d", s.ldapPort) }
func (s *Server) LDAPSURL() string { return fmt.Sprintf("ldaps://127.0.0.1:%d", s.ldapsP) }

// Start (re)starts a stopped server on the same ports and data.
func (s *Server) Start() {
	s.t.Helper()
	for attempt := 0; ; attempt++ {
		if s.ldapPort == 0 || attempt > 0 {
			s.ldapPort, s.ldapsP = freeport.TCP(s.t), freeport.TCP(s.t)
		}
		if s.launch() {
			return
		}
		if attempt == 4 {
			s.t.Fatal("slapd did not start")
		}
	}
}

func (s *Server) launch() bool {
	s.t.Helper()
	var logs bytes.Buffer
	cmd := exec.Command(Path, "-f", filepath.Join(s.dir, "slapd.conf"), "-d", "0",
		"-h", s.URL()+"/ "+s.LDAPSURL()+"/")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			s.t.Logf("slapd exited: %s", logs.String())
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.ldapsP), 100*time.Millisecond); err == nil {
			c.Close()
			s.cmd, s.exited = cmd, exited
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-exited
	s.t.Logf("slapd did not listen: %s", logs.String())
	return false
}

// Stop stops the server (the directory is down until Start).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Admin returns a connection bound as the root account, over LDAPS.
func (s *Server) Admin() *ldap.Conn {
	s.t.Helper()
	c, err := ldap.DialURL(s.LDAPSURL(), ldap.DialWithTLSConfig(&tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12}))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := c.Bind(AdminDN, AdminPassword); err != nil {
		c.Close()
		s.t.Fatal(err)
	}
	return c
}

// Modify changes one attribute of dn: replace with values (none deletes
// the attribute).
func (s *Server) Modify(dn, attr string, values ...string) {
	s.t.Helper()
	c := s.Admin()
	defer c.Close()
	m := ldap.NewModifyRequest(dn, nil)
	if len(values) == 0 {
		m.Delete(attr, nil)
	} else {
		m.Replace(attr, values)
	}
	if err := c.Modify(m); err != nil {
		s.t.Fatalf("modify %s %s: %v", dn, attr, err)
	}
}

// Delete removes an entry.
func (s *Server) Delete(dn string) {
	s.t.Helper()
	c := s.Admin()
	defer c.Close()
	if err := c.Del(ldap.NewDelRequest(dn, nil)); err != nil {
		s.t.Fatalf("delete %s: %v", dn, err)
	}
}

// EntryUUID reads an entry's entryUUID, the id a directory person's sub
// is derived from.
func (s *Server) EntryUUID(dn string) string {
	s.t.Helper()
	c := s.Admin()
	defer c.Close()
	res, err := c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 1, 5, false,
		"(objectClass=*)", []string{"entryUUID"}, nil))
	if err != nil || len(res.Entries) != 1 {
		s.t.Fatalf("entryUUID of %s: %v", dn, err)
	}
	return res.Entries[0].GetAttributeValue("entryUUID")
}

// Person is the LDIF of an inetOrgPerson under ou=people with a
// {SSHA}-free userPassword (slapd hashes nothing given in LDIF: the value is
// compared as stored, which is what a bind needs).
func Person(uid, mail, password string) string {
	return fmt.Sprintf("dn: uid=%s,ou=people,%s\nobjectClass: inetOrgPerson\nuid: %s\ncn: %s\nsn: %s\nmail: %s\nuserPassword: %s\n\n",
		uid, Base, uid, uid, uid, mail, password)
}

// Group is the LDIF of a groupOfNames under ou=groups with members (uids
// under ou=people).
func Group(cn string, uids ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dn: cn=%s,ou=groups,%s\nobjectClass: groupOfNames\ncn: %s\n", cn, Base, cn)
	for _, u := range uids {
		fmt.Fprintf(&b, "member: %s\n", PersonDN(u))
	}
	b.WriteString("\n")
	return b.String()
}

// PersonDN and GroupDN name the entries Person and Group make.
func PersonDN(uid string) string { return "uid=" + uid + ",ou=people," + Base }
func GroupDN(cn string) string   { return "cn=" + cn + ",ou=groups," + Base }

func (s *Server) writeConfig() {
	s.t.Helper()
	conf := fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload ppolicy
pidfile %[1]s/slapd.pid
argsfile %[1]s/slapd.args
TLSCACertificateFile %[1]s/ca.pem
TLSCertificateFile %[1]s/server.pem
TLSCertificateKeyFile %[1]s/server.key
database mdb
maxsize 67108864
suffix "%[2]s"
rootdn "%[3]s"
rootpw %[4]s
directory %[1]s/db
index objectClass eq
index uid,mail eq
index member eq
overlay ppolicy
ppolicy_default "%[5]s"
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
`, s.dir, Base, AdminDN, AdminPassword, policyDN)
	if err := os.WriteFile(filepath.Join(s.dir, "slapd.conf"), []byte(conf), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// writeTLS generates a CA and a server certificate for 127.0.0.1 and
// localhost (testca) and writes them where slapd.conf names them.
func (s *Server) writeTLS() {
	s.t.Helper()
	ca := testca.New(s.t, "ldaptest CA")
	s.CAPEM, s.pool = string(ca.CAPEM), ca.Pool
	for name, body := range map[string][]byte{"ca.pem": ca.CAPEM, "server.pem": ca.CertPEM, "server.key": ca.KeyPEM} {
		if err := os.WriteFile(filepath.Join(s.dir, name), body, 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}

// HashedPassword is password as a real directory stores it: the {SSHA}
// form slappasswd makes, which slapd checks at every bind.
func HashedPassword(t testing.TB, password string) string {
	t.Helper()
	out, err := exec.Command("/usr/sbin/slappasswd", "-h", "{SSHA}", "-s", password).Output()
	if err != nil {
		t.Fatalf("slappasswd: %v", err)
	}
	return strings.TrimSpace(string(out))
}
