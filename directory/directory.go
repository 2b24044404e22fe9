// Package directory signs people in against an LDAP or Active Directory
// server and reads who is there, through go-ldap
// (docs/operators/directories.md), and keeps the people it knows in step
// with their directory (Syncer: the leader's sync, writing through an
// Applier).
//
// A Client finds a person with the search account (UserFilter with the
// typed address escaped), then binds as that person over TLS (ldaps://, or
// ldap:// with StartTLS, verified against the configured CA). Plain
// ldap:// is refused unless Insecure is set. Connections bound as the
// search account are pooled; every call has a time-out, so a directory
// that is down answers ErrUnavailable in a bounded time.
//
// Invariants:
//   - No input reaches a filter unescaped (ldap.EscapeFilter).
//   - A person's id is IDAttribute's value (entryUUID, objectGUID as hex),
//     never the DN or the address: a renamed or moved entry is the same
//     person.
//   - A disabled person (Active Directory's userAccountControl bit 2,
//     OpenLDAP's pwdAccountLockedTime) is never signed in, even if the
//     server would accept the bind.
package directory

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// Config is one directory.
type Config struct {
	URL            string // ldap://host:port or ldaps://host:port
	StartTLS       bool
	CAPEM          string // the CA of the server's certificate; "" trusts the system's roots
	Insecure       bool   // allow ldap:// without StartTLS (passwords in the clear)
	BindDN         string // the search account
	BindPassword   string
	UserBase       string
	UserFilter     string // holds %s, the escaped address, once
	IDAttribute    string
	EmailAttribute string
	PhoneAttribute string
	GroupBase      string
	GroupFilter    string // holds %s, the escaped DN of the person, once; "" reads no groups
	// Timeout bounds each network step (dial, TLS, bind, search page);
	// default DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds each step of a call to the directory.
const DefaultTimeout = 5 * time.Second

// Person is what the directory says of one person.
type Person struct {
	DN       string
	ID       string // IDAttribute's value
	Email    string
	Phone    string
	Groups   []string // DNs of the groups GroupFilter finds
	Disabled bool
}

// Errors of a call.
var (
	// ErrNoSuchPerson: no entry matches the address (or more than one
	// does: an ambiguous address signs nobody in).
	ErrNoSuchPerson = errors.New("directory: no such person")
	// ErrInvalidCredentials: the person exists and the bind was refused.
	ErrInvalidCredentials = errors.New("directory: invalid credentials")
	// ErrDisabled: the person exists and is disabled in the directory.
	ErrDisabled = errors.New("directory: person disabled")
	// ErrUnavailable: the directory could not be reached or did not answer
	// in time, or the search account was refused.
	ErrUnavailable = errors.New("directory: unavailable")
)

// Check reports what is wrong with cfg, for the admin API: nil or an error
// naming the field.
func Check(cfg Config) error {
	u, err := url.Parse(cfg.URL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Path != "" && u.Path != "/":
		return fieldError{"url", "must be ldap://host:port or ldaps://host:port"}
	case u.Scheme == "ldaps" && cfg.StartTLS:
		return fieldError{"start_tls", "is for ldap://; ldaps:// is TLS already"}
	case u.Scheme == "ldap" && !cfg.StartTLS && !cfg.Insecure:
		return fieldError{"url", "ldap:// without start_tls sends passwords in the clear; set start_tls, use ldaps://, or set insecure"}
	case strings.Count(cfg.UserFilter, "%s") != 1 || !validFilter(strings.Replace(cfg.UserFilter, "%s", "x", 1)):
		return fieldError{"user_filter", "must be an LDAP filter holding %s once, e.g. (mail=%s)"}
	case cfg.GroupFilter != "" && (strings.Count(cfg.GroupFilter, "%s") != 1 || !validFilter(strings.Replace(cfg.GroupFilter, "%s", "x", 1))):
		return fieldError{"group_filter", "must be an LDAP filter holding %s once, e.g. (member=%s)"}
	case cfg.IDAttribute == "":
		return fieldError{"id_attribute", "is required (entryUUID, objectGUID)"}
	}
	for field, dn := range map[string]string{"user_base": cfg.UserBase, "group_base": cfg.GroupBase, "bind_dn": cfg.BindDN} {
		if _, err := ldap.ParseDN(dn); err != nil || (dn == "" && field == "user_base") {
			return fieldError{field, "must be a DN"}
		}
	}
	if cfg.CAPEM != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(cfg.CAPEM)) {
		return fieldError{"ca_pem", "holds no PEM certificate"}
	}
	return nil
}

func validFilter(f string) bool {
	_, err := ldap.CompileFilter(f)
	return err == nil
}

// fieldError names the field of Config that is wrong.
type fieldError struct{ field, msg string }

func (e fieldError) Error() string { return e.field + ": " + e.msg }

// Field returns the field an error of Check names ("" for others).
func Field(err error) string {
	var fe fieldError
	if errors.As(err, &fe) {
		return fe.field
	}
	return ""
}

// Client talks to one directory. It is safe for concurrent use.
type Client struct {
	cfg  Config
	tls  *tls.Config
	mu   sync.Mutex
	idle []*ldap.Conn // bound as the search account
	shut bool
}

// maxIdle bounds the pooled connections of a Client.
const maxIdle = 4

// New returns a Client for cfg (checked with Check).
func New(cfg Config) (*Client, error) {
	if err := Check(cfg); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	u, _ := url.Parse(cfg.URL)
	tc := &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	if cfg.CAPEM != "" {
		tc.RootCAs = x509.NewCertPool()
		tc.RootCAs.AppendCertsFromPEM([]byte(cfg.CAPEM))
	}
	return &Client{cfg: cfg, tls: tc}, nil
}

// Close closes the pooled connections.
func (c *Client) Close() {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.shut = nil, true
	c.mu.Unlock()
	for _, l := range idle {
		l.Close()
	}
}

// dial opens a TLS-protected connection (or a plain one with Insecure).
func (c *Client) dial() (*ldap.Conn, error) {
	l, err := ldap.DialURL(c.cfg.URL, ldap.DialWithDialer(&net.Dialer{Timeout: c.cfg.Timeout}), ldap.DialWithTLSConfig(c.tls))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	l.SetTimeout(c.cfg.Timeout)
	if c.cfg.StartTLS {
		if err := l.StartTLS(c.tls); err != nil {
			l.Close()
			return nil, fmt.Errorf("%w: StartTLS: %v", ErrUnavailable, err)
		}
	}
	return l, nil
}

// searcher returns a connection bound as the search account.
func (c *Client) searcher() (*ldap.Conn, error) {
	c.mu.Lock()
	for len(c.idle) > 0 {
		l := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		if !l.IsClosing() {
			c.mu.Unlock()
			return l, nil
		}
		l.Close()
	}
	c.mu.Unlock()
	l, err := c.dial()
	if err != nil {
		return nil, err
	}
	if err := l.Bind(c.cfg.BindDN, c.cfg.BindPassword); err != nil {
		l.Close()
		return nil, fmt.Errorf("%w: the search account's bind: %v", ErrUnavailable, err)
	}
	return l, nil
}

// release returns a healthy search connection to the pool.
func (c *Client) release(l *ldap.Conn, healthy bool) {
	c.mu.Lock()
	if healthy && !c.shut && len(c.idle) < maxIdle && !l.IsClosing() {
		c.idle = append(c.idle, l)
		l = nil
	}
	c.mu.Unlock()
	if l != nil {
		l.Close()
	}
}

// netError tells a failure of the connection from an answer of the server.
func netError(err error) bool {
	var le *ldap.Error
	if errors.As(err, &le) {
		return le.ResultCode == ldap.ErrorNetwork || le.ResultCode == ldap.LDAPResultTimeout || le.ResultCode == ldap.ErrorUnexpectedResponse
	}
	return true
}

// attributes are what a person's search asks for.
func (c *Client) attributes() []string {
	a := []string{c.cfg.IDAttribute, "userAccountControl", "pwdAccountLockedTime"}
	for _, s := range []string{c.cfg.EmailAttribute, c.cfg.PhoneAttribute} {
		if s != "" {
			a = append(a, s)
		}
	}
	return a
}

// Authenticate finds the person with address email and binds as them
// with password. It returns the person with their groups, or
// ErrNoSuchPerson, ErrInvalidCredentials, ErrDisabled or ErrUnavailable.
func (c *Client) Authenticate(ctx context.Context, email, password string) (Person, error) {
	if err := ctx.Err(); err != nil {
		return Person{}, err
	}
	if password == "" {
		// An empty password would be an unauthenticated bind, which
		// servers accept (RFC 4513 5.1.2): never a sign-in.
		return Person{}, ErrInvalidCredentials
	}
	l, err := c.searcher()
	if err != nil {
		return Person{}, err
	}
	filter := fmt.Sprintf(c.cfg.UserFilter, ldap.EscapeFilter(email))
	res, err := l.Search(ldap.NewSearchRequest(c.cfg.UserBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 2,
		int(c.cfg.Timeout/time.Second), false, filter, c.attributes(), nil))
	if err != nil {
		c.release(l, false)
		return Person{}, fmt.Errorf("%w: search: %v", ErrUnavailable, err)
	}
	if len(res.Entries) != 1 {
		c.release(l, true)
		return Person{}, ErrNoSuchPerson
	}
	p := c.person(res.Entries[0])
	if p.ID == "" {
		c.release(l, true)
		return Person{}, ErrNoSuchPerson
	}
	if p.Disabled {
		c.release(l, true)
		return p, ErrDisabled
	}
	if p.Groups, err = c.groups(l, p.DN); err != nil {
		c.release(l, false)
		return Person{}, err
	}
	// The person's bind on its own connection: the pooled one stays the
	// search account's.
	u, err := c.dial()
	if err != nil {
		c.release(l, true)
		return Person{}, err
	}
	defer u.Close()
	c.release(l, true)
	if err := u.Bind(p.DN, password); err != nil {
		if netError(err) {
			return Person{}, fmt.Errorf("%w: bind: %v", ErrUnavailable, err)
		}
		return p, ErrInvalidCredentials
	}
	return p, nil
}

// person reads an entry.
func (c *Client) person(e *ldap.Entry) Person {
	p := Person{DN: e.DN, ID: idValue(e, c.cfg.IDAttribute)}
	if c.cfg.EmailAttribute != "" {
		p.Email = e.GetAttributeValue(c.cfg.EmailAttribute)
	}
	if c.cfg.PhoneAttribute != "" {
		p.Phone = e.GetAttributeValue(c.cfg.PhoneAttribute)
	}
	if uac, err := strconv.ParseInt(e.GetAttributeValue("userAccountControl"), 10, 64); err == nil && uac&2 != 0 {
		p.Disabled = true
	}
	if e.GetAttributeValue("pwdAccountLockedTime") != "" {
		p.Disabled = true
	}
	return p
}

// idValue is the id attribute's value; a binary one (objectGUID) as hex.
func idValue(e *ldap.Entry, attr string) string {
	raw := e.GetRawAttributeValue(attr)
	if len(raw) == 0 {
		return ""
	}
	if strings.EqualFold(attr, "objectGUID") || !printable(raw) {
		return hex.EncodeToString(raw)
	}
	return string(raw)
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// groups returns the DNs of the groups of the person dn.
func (c *Client) groups(l *ldap.Conn, dn string) ([]string, error) {
	if c.cfg.GroupFilter == "" || c.cfg.GroupBase == "" {
		return nil, nil
	}
	filter := fmt.Sprintf(c.cfg.GroupFilter, ldap.EscapeFilter(dn))
	res, err := l.SearchWithPaging(ldap.NewSearchRequest(c.cfg.GroupBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0,
		int(c.cfg.Timeout/time.Second), false, filter, []string{"dn"}, nil), 500)
	if err != nil {
		return nil, fmt.Errorf("%w: group search: %v", ErrUnavailable, err)
	}
	out := make([]string, 0, len(res.Entries))
	for _, e := range res.Entries {
		out = append(out, e.DN)
	}
	return out, nil
}

// People reads every person UserFilter matches with any address (its %s
// as *), in pages, and calls fn for each that want accepts (nil: all),
// with their groups. It stops at fn's first error. The leader's sync
// compares them with the people it knows, and reads the groups of those
// only: a directory of 100,000 people of whom 1,000 signed in here costs
// 1,000 group searches, not 100,000.
func (c *Client) People(ctx context.Context, want func(id string) bool, fn func(Person) error) error {
	l, err := c.searcher()
	if err != nil {
		return err
	}
	healthy := false
	defer func() { c.release(l, healthy) }()
	filter := strings.Replace(c.cfg.UserFilter, "%s", "*", 1)
	res, err := l.SearchWithPaging(ldap.NewSearchRequest(c.cfg.UserBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0,
		int(c.cfg.Timeout/time.Second), false, filter, c.attributes(), nil), 500)
	if err != nil {
		return fmt.Errorf("%w: search: %v", ErrUnavailable, err)
	}
	for _, e := range res.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := c.person(e)
		if p.ID == "" || (want != nil && !want(p.ID)) {
			continue
		}
		if !p.Disabled {
			if p.Groups, err = c.groups(l, p.DN); err != nil {
				return err
			}
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	healthy = true
	return nil
}

// SameDN reports whether two DNs name the same entry (case and spacing
// aside).
func SameDN(a, b string) bool {
	da, err1 := ldap.ParseDN(a)
	db, err2 := ldap.ParseDN(b)
	if err1 != nil || err2 != nil {
		return strings.EqualFold(a, b)
	}
	return da.EqualFold(db)
}
