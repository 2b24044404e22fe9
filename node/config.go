package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/oidc"
	"github.com/oidcd/oidcd/session"
)

// Config is everything one node needs. Zero values take the defaults of
// `oidcd serve` (docs/operators/node.md).
type Config struct {
	// Version is the build's version, advertised to peers and in metrics
	// (default "dev"; cmd/oidcd sets its own).
	Version         string
	Issuer          string
	HTTPAddr        string
	DataDir         string
	NodeID          string // empty: read from DataDir, or generated once
	RaftAddr        string
	GossipAddr      string
	Join            []string
	BootstrapExpect int
	// NonVoter (--non-voter) makes the node an edge replica: the leader
	// adds it as a raft non-voter, so it serves everything from its own
	// state without voting or counting towards the quorum. It needs Join,
	// and ignores BootstrapExpect and StaticPeers (dropBootstrapOfNonVoter).
	NonVoter   bool
	ClusterKey string
	AdminToken string // empty: generated at first bootstrap
	RateLimit  string
	// TrustedProxies (--trusted-proxies): comma-separated CIDRs whose
	// connections may name the client's address, in the one way
	// ProxyHeader says (httpx.TrustedProxies); empty trusts none.
	TrustedProxies string
	// ProxyHeader (--proxy-header): how a trusted proxy names the client:
	// "x-forwarded-for" (the default when empty), "forwarded" (RFC 7239)
	// or "proxy-protocol" (a PROXY v1/v2 header on each connection to
	// HTTPAddr, httpx.ProxyProtocolListener). Every other way is ignored.
	ProxyHeader string
	// AdminAddr (--admin-addr), when set, is the one listener of the
	// admin API, the console and /metrics; --http-addr then answers 404
	// for them. Empty: everything on HTTPAddr.
	AdminAddr string
	// AdminACR (--admin-acr) is the least acr of a person's sign-in that
	// administers the site: a sign-in through the built-in client
	// (oidc.AdminClientID) is asked for it, and the admin API refuses a
	// person's token below it. One of the three the provider issues;
	// default DefaultAdminACR.
	AdminACR string
	// TLSCert and TLSKey (--tls-cert, --tls-key): PEM files; when both are
	// set, every listener serves HTTPS only (TLS 1.2+, HTTP/2), and the
	// pair is reloaded when the files change or on ReloadTLS (SIGHUP).
	TLSCert, TLSKey string
	// ShutdownDrain (--shutdown-drain, 5 s by default there; zero here
	// is none): on a
	// planned stop (Drain), how long /readyz answers 503 while the node
	// still serves, so that a load balancer stops sending first.
	ShutdownDrain time.Duration
	// AdminListener, when set, is used instead of listening on AdminAddr
	// (tests), and implies a separate admin listener.
	AdminListener net.Listener
	SMSOutbox     string
	SMSWebhook    string
	// Mail to people (docs/operators/email.md): the site's relay
	// (--smtp-url, smtp:// with STARTTLS or smtps://), the From address,
	// the CA that signs the relay's certificate, and an outbox file that
	// gets every message as a JSON line. With neither a relay nor an
	// outbox, invitations, resets, address checks and registration are
	// off (MailEnabled).
	SMTPURL     string
	SMTPFrom    string
	SMTPCAFile  string
	EmailOutbox string
	KEKFile     string
	KeyRotation time.Duration
	SessionIdle time.Duration // SSO session idle lifetime (default 2h)
	SessionMax  time.Duration // SSO session absolute lifetime (default 12h)
	ReapEvery   time.Duration // how often the leader deletes expired records (default 1m)
	// ReapGrace is how long after it stopped mattering a record is deleted
	// (default 5m), so that a node whose clock runs a little behind never
	// sees a live record vanish. Soak runs shorten it to reach their
	// steady state sooner.
	ReapGrace time.Duration
	// AuditRetention is how long audit events are kept (default
	// DefaultAuditRetention); older ones are pruned by the reap.
	AuditRetention time.Duration
	Demo           bool // seed a demo organization, person and client on an empty store
	// DemoRedirectURI is the demo client's redirect URI (default
	// DemoRedirectURI, oidcd-demo-rp's); its siblings signed-out and
	// backchannel-logout are registered as the post-logout redirect URI
	// and the back-channel logout URI.
	DemoRedirectURI string
	// PprofAddr, when set, serves net/http/pprof on this loopback address
	// (--pprof-addr); any other address is refused.
	PprofAddr string

	// HTTPListener, when set, is used instead of listening on HTTPAddr
	// (tests listen on port 0 first to learn the issuer).
	HTTPListener net.Listener
	// RaftListener, likewise, for the raft transport.
	RaftListener net.Listener
	// Dial, when set, opens every node-to-node connection (testcluster
	// cuts links with it).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// StaticPeers, when set on a node without raft state, bootstraps these
	// voters at once instead of waiting for gossip (testcluster).
	StaticPeers []Peer

	Logger *slog.Logger
	Out    io.Writer // where the one-time banner (admin token, demo sign-in) goes
	Now    func() time.Time

	// Tuning for tests; zero values are production defaults.
	// HTTPReadHeaderTimeout (5 s) and HTTPReadTimeout (15 s) bound how long
	// a client may take to send its headers and its whole request.
	HTTPReadHeaderTimeout time.Duration
	HTTPReadTimeout       time.Duration
	PasswordParams        password.Params
	HeartbeatTimeout      time.Duration
	ElectionTimeout       time.Duration
	LeaderLease           time.Duration
	KeyPublishLead        time.Duration
	KeyRetention          time.Duration
	// Log compaction (cluster.Config): a snapshot every SnapshotThreshold
	// entries, checked every SnapshotInterval, keeping TrailingLogs entries
	// for followers that lag, and RetainSnapshots snapshots on disk. Zero
	// values take cluster's defaults (8192 entries, an interval paced by
	// each snapshot's cost from 30 s to 30 minutes, 10240 entries, one
	// snapshot).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	RetainSnapshots   int

	// trailGate, set only by tests (export_test.go), holds the audit
	// trail's catch-up (trail.go) before each fetch until it is closed.
	trailGate <-chan struct{}
}

// MinAdminTokenLen is the shortest --admin-token a node accepts.
const MinAdminTokenLen = 32

// Peer is a voter of a statically formed cluster.
type Peer struct {
	ID, RaftAddr string
}

// Defaults of `oidcd serve` (docs/operators/node.md).
const (
	DefaultIssuer      = "http://127.0.0.1:8080"
	DefaultHTTPAddr    = "127.0.0.1:8080"
	DefaultDataDir     = "./data"
	DefaultRaftAddr    = "127.0.0.1:8300"
	DefaultGossipAddr  = "127.0.0.1:8301"
	DefaultRateLimit   = "5/60s"
	DefaultKeyRotation = 30 * 24 * time.Hour
	DefaultSessionIdle = session.DefaultIdle
	DefaultSessionMax  = session.DefaultMax
	// DefaultAdminACR: administrators sign in with a second factor.
	DefaultAdminACR = oidc.ACRMFA
	// DefaultAuditRetention keeps audit events 90 days.
	DefaultAuditRetention = 2160 * time.Hour
)

func (c *Config) setDefaults() {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&c.Version, "dev")
	def(&c.Issuer, DefaultIssuer)
	def(&c.HTTPAddr, DefaultHTTPAddr)
	def(&c.DataDir, DefaultDataDir)
	def(&c.RaftAddr, DefaultRaftAddr)
	def(&c.GossipAddr, DefaultGossipAddr)
	def(&c.RateLimit, DefaultRateLimit)
	def(&c.AdminACR, DefaultAdminACR)
	def(&c.DemoRedirectURI, DemoRedirectURI)
	if c.BootstrapExpect == 0 {
		c.BootstrapExpect = 1
	}
	if c.KeyRotation == 0 {
		c.KeyRotation = DefaultKeyRotation
	}
	c.ShutdownDrain = max(c.ShutdownDrain, 0)
	if c.SessionIdle == 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.SessionMax == 0 {
		c.SessionMax = DefaultSessionMax
	}
	if c.ReapGrace == 0 {
		c.ReapGrace = 5 * time.Minute
	}
	if c.ReapEvery == 0 {
		c.ReapEvery = time.Minute
	}
	if c.AuditRetention == 0 {
		c.AuditRetention = DefaultAuditRetention
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PasswordParams == (password.Params{}) {
		c.PasswordParams = password.DefaultParams()
	}
	c.Issuer = strings.TrimRight(c.Issuer, "/")
	c.dropBootstrapOfNonVoter()
}

// dropBootstrapOfNonVoter makes a non-voter ignore --bootstrap-expect and
// StaticPeers, saying so in its log, so that every node of a site can share
// one config file (the operators' guide, "Edge replicas"). Both only
// matter to the voters that form a cluster: a non-voter never bootstraps
// one, it joins through --join and the leader adds it. StaticPeers are
// the voters' raft addresses, not gossip addresses, so they cannot stand
// in for --join either.
func (c *Config) dropBootstrapOfNonVoter() {
	if !c.NonVoter || (c.BootstrapExpect <= 1 && len(c.StaticPeers) == 0) {
		return
	}
	c.Logger.Info("--non-voter: ignoring --bootstrap-expect and static peers; a non-voter joins an existing cluster through --join and the leader adds it",
		"bootstrap_expect", c.BootstrapExpect, "static_peers", len(c.StaticPeers))
	c.BootstrapExpect, c.StaticPeers = 1, nil
}

// Check reports every problem of c as New would: the defaults of the
// fields left zero are filled in first, on a copy (`oidcd config check`).
func (c Config) Check() error {
	c.setDefaults()
	return c.Validate()
}

// Validate reports every configuration problem at once.
func (c *Config) Validate() error {
	var errs []error
	u, err := url.Parse(c.Issuer)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		errs = append(errs, fmt.Errorf("--issuer %q: must be an absolute http(s) URL", c.Issuer))
	case u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("--issuer %q: must have no query or fragment", c.Issuer))
	}
	if c.BootstrapExpect < 1 {
		errs = append(errs, fmt.Errorf("--bootstrap-expect %d: must be at least 1", c.BootstrapExpect))
	}
	if c.NonVoter && len(c.Join) == 0 {
		errs = append(errs, errors.New("--non-voter needs --join: the gossip addresses of nodes of the cluster it joins"))
	}
	if why := c.operatorKeyReason(); why != "" && c.ClusterKey == "" {
		errs = append(errs, fmt.Errorf("--cluster-key is required when %s (oidcd keygen prints one; give it through OIDCD_CLUSTER_KEY)", why))
	}
	if c.AdminToken != "" && len(c.AdminToken) < MinAdminTokenLen {
		errs = append(errs, fmt.Errorf("--admin-token: %d bytes; want at least %d (oidcd keygen prints one of 44)", len(c.AdminToken), MinAdminTokenLen))
	}
	if c.ClusterKey != "" {
		if _, err := c.clusterKey(); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := httpx.ParseTrustedProxies(c.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("--trusted-proxies %q: %v (want comma-separated CIDRs such as 10.0.0.0/8)", c.TrustedProxies, err))
	}
	if way, err := httpx.ParseProxyHeader(c.ProxyHeader); err != nil {
		errs = append(errs, fmt.Errorf("--proxy-header: %v", err))
	} else if way == httpx.ProxyProtocol && strings.TrimSpace(c.TrustedProxies) == "" {
		errs = append(errs, errors.New("--proxy-header proxy-protocol needs --trusted-proxies: the balancers' addresses, the only ones that may send a PROXY header"))
	}
	if c.SessionIdle < time.Minute || c.SessionMax < c.SessionIdle {
		errs = append(errs, fmt.Errorf("--session-idle %s, --session-max %s: idle must be at least 1m and at most the maximum", c.SessionIdle, c.SessionMax))
	}
	if !slices.Contains(adminACRs, c.AdminACR) {
		errs = append(errs, fmt.Errorf("--admin-acr %q: want one of %s", c.AdminACR, strings.Join(adminACRs, ", ")))
	}
	if c.RateLimit != "off" && !validRate(c.RateLimit) {
		errs = append(errs, fmt.Errorf("--rate-limit %q: want N/duration (for example 5/60s) or off", c.RateLimit))
	}
	if c.Demo {
		if _, _, err := demoURIs(c.DemoRedirectURI); err != nil {
			errs = append(errs, err)
		}
	}
	if c.KeyRotation < time.Hour {
		errs = append(errs, fmt.Errorf("--key-rotation %s: must be at least 1h", c.KeyRotation))
	}
	if c.PprofAddr != "" {
		if err := checkLoopbackAddr(c.PprofAddr); err != nil {
			errs = append(errs, fmt.Errorf("--pprof-addr %q: %v", c.PprofAddr, err))
		}
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); c.RaftListener == nil && err != nil {
		errs = append(errs, fmt.Errorf("--raft-addr %q: %v", c.RaftAddr, err))
	}
	if c.HTTPListener == nil {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("--http-addr %q: %v", c.HTTPAddr, err))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errTLSPair)
	}
	if c.AdminAddr != "" && c.AdminListener == nil {
		if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
			errs = append(errs, fmt.Errorf("--admin-addr %q: %v", c.AdminAddr, err))
		} else if c.AdminAddr == c.HTTPAddr {
			errs = append(errs, fmt.Errorf("--admin-addr %q: the same as --http-addr; leave it empty to serve both there", c.AdminAddr))
		}
	}
	errs = append(errs, c.mailProblems()...) // email.go
	return errors.Join(errs...)
}

// adminACRs are the values --admin-acr takes: the acr values the provider
// issues, weakest first.
var adminACRs = []string{oidc.ACRPhone, oidc.ACRPwd, oidc.ACRMFA}

// validRate checks the "N/duration" form of --rate-limit.
func validRate(s string) bool {
	n, d, ok := strings.Cut(s, "/")
	if !ok {
		return false
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 1 {
		return false
	}
	dur, err := time.ParseDuration(d)
	return err == nil && dur > 0
}

// clusterKey decodes --cluster-key: base64 of 32 bytes.
func (c *Config) clusterKey() ([]byte, error) {
	if c.ClusterKey == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(c.ClusterKey))
	if err != nil || len(k) != 32 {
		return nil, errors.New("--cluster-key: want base64 of 32 random bytes (oidcd keygen prints one)")
	}
	return k, nil
}

// MailEnabled reports whether the provider sends mail to people: through
// a relay, to an outbox file, or both.
func (c Config) MailEnabled() bool { return c.SMTPURL != "" || c.EmailOutbox != "" }
