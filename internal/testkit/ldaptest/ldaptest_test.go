package ldaptest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/go-ldap/ldap/v3"
)

// TestServer: slapd starts with the seeded entries; a person binds over
// LDAPS and over StartTLS, verified against the generated CA; a wrong
// password and a locked person (pwdAccountLockedTime) are refused; the
// server stops and starts again on the same port.
func TestServer(t *testing.T) {
	s := Start(t, Person("ann", "ann@example.com", "ann-password")+Group("staff", "ann"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CAPEM))
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
	c, err := ldap.DialURL(s.LDAPSURL(), ldap.DialWithTLSConfig(tc))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Bind(PersonDN("ann"), "ann-password"); err != nil {
		t.Fatalf("bind over LDAPS: %v", err)
	}
	if err := c.Bind(PersonDN("ann"), "wrong"); !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
		t.Fatalf("wrong password: got %v", err)
	}
	c.Close()
	c, err = ldap.DialURL(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartTLS(tc); err != nil {
		t.Fatalf("StartTLS: %v", err)
	}
	if err := c.Bind(PersonDN("ann"), "ann-password"); err != nil {
		t.Fatalf("bind after StartTLS: %v", err)
	}
	c.Close()
	if id := s.EntryUUID(PersonDN("ann")); len(id) != 36 {
		t.Fatalf("entryUUID: %q", id)
	}
	s.Modify(PersonDN("ann"), "pwdAccountLockedTime", "000001010000Z")
	c, _ = ldap.DialURL(s.LDAPSURL(), ldap.DialWithTLSConfig(tc))
	if err := c.Bind(PersonDN("ann"), "ann-password"); err == nil {
		t.Fatal("a locked person could bind")
	}
	c.Close()
	s.Stop()
	if _, err := ldap.DialURL(s.LDAPSURL(), ldap.DialWithTLSConfig(tc)); err == nil {
		t.Fatal("dial succeeded with the server stopped")
	}
	s.Start()
	s.Modify(PersonDN("ann"), "pwdAccountLockedTime")
	c, err = ldap.DialURL(s.LDAPSURL(), ldap.DialWithTLSConfig(tc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bind(PersonDN("ann"), "ann-password"); err != nil {
		t.Fatalf("bind after restart and unlock: %v", err)
	}
}
