package directory

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/oidcd/oidcd/internal/testkit/ldaptest"
)

func seeded(t *testing.T) *ldaptest.Server {
	return ldaptest.Start(t, ldaptest.Person("ann", "ann@example.com", "ann-password")+
		ldaptest.Person("bob", "bob@example.com", "bob-password")+
		ldaptest.Person("eve", "eve@example.com", "eve-password")+
		ldaptest.Group("staff", "ann", "bob")+ldaptest.Group("admins", "ann"))
}

func config(s *ldaptest.Server) Config {
	return Config{URL: s.LDAPSURL(), CAPEM: s.CAPEM, BindDN: ldaptest.AdminDN, BindPassword: ldaptest.AdminPassword,
		UserBase: "ou=people," + ldaptest.Base, UserFilter: "(&(objectClass=inetOrgPerson)(mail=%s))",
		IDAttribute: "entryUUID", EmailAttribute: "mail", PhoneAttribute: "telephoneNumber",
		GroupBase: "ou=groups," + ldaptest.Base, GroupFilter: "(member=%s)", Timeout: 2 * time.Second}
}

func TestAuthenticate(t *testing.T) {
	s := seeded(t)
	ldaps := config(s)
	startTLS := config(s)
	startTLS.URL, startTLS.StartTLS = s.URL(), true
	for name, cfg := range map[string]Config{"ldaps": ldaps, "starttls": startTLS} {
		t.Run(name, func(t *testing.T) {
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			p, err := c.Authenticate(ctx, "ANN@example.com", "ann-password")
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != s.EntryUUID(ldaptest.PersonDN("ann")) || p.Email != "ann@example.com" || p.DN != ldaptest.PersonDN("ann") {
				t.Fatalf("person: %+v", p)
			}
			slices.Sort(p.Groups)
			if !slices.Equal(p.Groups, []string{ldaptest.GroupDN("admins"), ldaptest.GroupDN("staff")}) {
				t.Fatalf("groups: %v", p.Groups)
			}
			for _, tc := range []struct {
				name, email, password string
				want                  error
			}{
				{"wrong password", "ann@example.com", "nope", ErrInvalidCredentials},
				{"empty password (an unauthenticated bind)", "ann@example.com", "", ErrInvalidCredentials},
				{"unknown", "zed@example.com", "x", ErrNoSuchPerson},
				{"wildcard", "*", "ann-password", ErrNoSuchPerson},
				{"filter injection", "ann@example.com)(|(mail=*", "ann-password", ErrNoSuchPerson},
				{"another person's password", "bob@example.com", "ann-password", ErrInvalidCredentials},
			} {
				if _, err := c.Authenticate(ctx, tc.email, tc.password); !errors.Is(err, tc.want) {
					t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
				}
			}
		})
	}
}

func TestDisabledAndUnavailable(t *testing.T) {
	s := seeded(t)
	c, err := New(config(s))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	s.Modify(ldaptest.PersonDN("bob"), "pwdAccountLockedTime", "000001010000Z")
	if _, err := c.Authenticate(ctx, "bob@example.com", "bob-password"); !errors.Is(err, ErrDisabled) {
		t.Fatalf("locked person: got %v, want ErrDisabled", err)
	}
	var people []Person
	if err := c.People(ctx, nil, func(p Person) error { people = append(people, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(people) != 3 {
		t.Fatalf("People: %+v", people)
	}
	for _, p := range people {
		if (p.Email == "bob@example.com") != p.Disabled {
			t.Errorf("%s: disabled %v", p.Email, p.Disabled)
		}
	}
	// Only the people the caller knows are read further.
	annID := s.EntryUUID(ldaptest.PersonDN("ann"))
	people = nil
	if err := c.People(ctx, func(id string) bool { return id == annID }, func(p Person) error { people = append(people, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(people) != 1 || people[0].ID != annID || len(people[0].Groups) != 2 {
		t.Fatalf("People with a filter: %+v", people)
	}

	s.Stop()
	start := time.Now()
	if _, err := c.Authenticate(ctx, "ann@example.com", "ann-password"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("stopped directory: got %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the stopped directory took %v to answer", d)
	}
	if err := c.People(ctx, nil, func(Person) error { return nil }); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("People with the directory stopped: %v", err)
	}
	s.Start()
	if _, err := c.Authenticate(ctx, "ann@example.com", "ann-password"); err != nil {
		t.Fatalf("after the directory is back: %v", err)
	}
}

func TestWrongCAIsUnavailable(t *testing.T) {
	s := seeded(t)
	other := ldaptest.Start(t, "")
	cfg := config(s)
	cfg.CAPEM = other.CAPEM
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Authenticate(context.Background(), "ann@example.com", "ann-password"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a server certificate of another CA: got %v, want ErrUnavailable", err)
	}
}

func TestCheck(t *testing.T) {
	good := Config{URL: "ldaps://dc1.example.com:636", BindDN: "cn=svc,dc=example,dc=com", UserBase: "dc=example,dc=com",
		UserFilter: "(mail=%s)", IDAttribute: "objectGUID", GroupBase: "dc=example,dc=com", GroupFilter: "(member=%s)"}
	if err := Check(good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"plain ldap", func(c *Config) { c.URL = "ldap://dc1:389" }, "url"},
		{"plain ldap, insecure", func(c *Config) { c.URL, c.Insecure = "ldap://dc1:389", true }, ""},
		{"ldap with starttls", func(c *Config) { c.URL, c.StartTLS = "ldap://dc1:389", true }, ""},
		{"ldaps with starttls", func(c *Config) { c.StartTLS = true }, "start_tls"},
		{"http", func(c *Config) { c.URL = "http://dc1" }, "url"},
		{"no %s", func(c *Config) { c.UserFilter = "(mail=ann)" }, "user_filter"},
		{"two %s", func(c *Config) { c.UserFilter = "(|(mail=%s)(uid=%s))" }, "user_filter"},
		{"not a filter", func(c *Config) { c.UserFilter = "mail=%s" }, "user_filter"},
		{"group filter", func(c *Config) { c.GroupFilter = "(member=x)" }, "group_filter"},
		{"no id", func(c *Config) { c.IDAttribute = "" }, "id_attribute"},
		{"base", func(c *Config) { c.UserBase = "not a dn" }, "user_base"},
		{"ca", func(c *Config) { c.CAPEM = "junk" }, "ca_pem"},
	} {
		c := good
		tc.edit(&c)
		if got := Field(Check(c)); got != tc.field {
			t.Errorf("%s: got field %q (%v), want %q", tc.name, got, Check(c), tc.field)
		}
	}
}

func TestSameDN(t *testing.T) {
	if !SameDN("CN=Staff, OU=Groups,DC=example,DC=com", "cn=staff,ou=groups,dc=example,dc=com") {
		t.Error("case and spacing")
	}
	if SameDN("cn=staff,ou=groups,dc=example,dc=com", "cn=admins,ou=groups,dc=example,dc=com") {
		t.Error("different groups")
	}
}

// BenchmarkAuthenticate: the search and the bind of one sign-in against a
// local slapd ({SSHA} password), four at a time: the ceiling of a
// directory sign-in on this machine (slapd shares its cores).
func BenchmarkAuthenticate(b *testing.B) {
	s := ldaptest.Start(b, ldaptest.Person("ann", "ann@example.com", ldaptest.HashedPassword(b, "ann-password"))+ldaptest.Group("staff", "ann"))
	cfg := Config{URL: s.LDAPSURL(), CAPEM: s.CAPEM, BindDN: ldaptest.AdminDN, BindPassword: ldaptest.AdminPassword,
		UserBase: "ou=people," + ldaptest.Base, UserFilter: "(mail=%s)", IDAttribute: "entryUUID", EmailAttribute: "mail",
		GroupBase: "ou=groups," + ldaptest.Base, GroupFilter: "(member=%s)"}
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Authenticate(context.Background(), "ann@example.com", "ann-password"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPersonOfActiveDirectoryEntry: what an Active Directory entry says,
// read as the sync and sign-in read it: objectGUID (binary) as hex, and
// userAccountControl's bit 2 (ACCOUNTDISABLE) as disabled.
func TestPersonOfActiveDirectoryEntry(t *testing.T) {
	c := &Client{cfg: Config{IDAttribute: "objectGUID", EmailAttribute: "mail", PhoneAttribute: "mobile"}}
	guid := string([]byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef})
	for _, tc := range []struct {
		uac      string
		disabled bool
	}{{"512", false}, {"514", true}, {"66050", true}, {"66048", false}, {"", false}} {
		e := ldap.NewEntry("CN=Ann,OU=Staff,DC=corp,DC=example", map[string][]string{
			"objectGUID": {guid}, "mail": {"ann@corp.example"}, "mobile": {"+15550100"}, "userAccountControl": {tc.uac}})
		p := c.person(e)
		if p.ID != "1032547698badcfe0123456789abcdef" || p.Email != "ann@corp.example" || p.Phone != "+15550100" || p.Disabled != tc.disabled {
			t.Errorf("userAccountControl %q: %+v, want disabled %v", tc.uac, p, tc.disabled)
		}
	}
}
