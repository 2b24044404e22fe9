package oidc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/ratelimit"
	"github.com/oidcd/oidcd/internal/seal"
	"github.com/oidcd/oidcd/internal/sms"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/webui"
)

// Applier is the write path (fsm.Applier).
type Applier = fsm.Applier

// Keys signs our tokens and verifies tokens we issued. VerifyKid also
// names the key that verified a token, and Published tells whether that
// key is still published: together they let verified tokens be cached.
type Keys interface {
	KeySource
	Sign(claims any, typ string) ([]byte, error)
	VerifyKid(token []byte) (claims []byte, kid string, err error)
	Published(kid string) (bool, error)
}

var _ Keys = (*keys.Manager)(nil)

// Authentication strength values (acr) and methods (amr).
const (
	ACRMFA   = "urn:service:sso:acr:mfa"
	ACRPwd   = "urn:service:sso:acr:pwd" // #nosec G101 -- an acr value, not a credential
	ACRPhone = "urn:service:sso:acr:phone"

	AMRPassword = "pwd"
	AMRPasskey  = "hwk"
	AMROTP      = "otp"
	AMRRecovery = "rcv"
	AMRSMS      = "sms"
)

// SessionCookie is the name of the SSO cookie; package logout reads it to
// find the browser's session.
const SessionCookie = "oidcd_session"

// Scopes a client may ask for.
const (
	ScopeOpenID  = "openid"
	ScopeEmail   = "email"
	ScopeProfile = "profile"
)

// Config wires the protocol handlers to one node.
type Config struct {
	Issuer  string // {base_url}, no trailing slash
	State   *fsm.State
	Applier Applier
	Keys    Keys
	UI      *webui.UI
	Hasher  *password.Hasher
	Now     func() time.Time
	Logger  *slog.Logger
	// Registerer receives the protocol metrics (nil: none).
	Registerer prometheus.Registerer

	// RateLimit is "N/duration" per client and address (default "5/60s")
	// or "off".
	RateLimit string
	// RateLimiter, when set and RateLimit is not "off", decides instead of
	// a limiter of this provider's own (the cluster's, kept on its leader:
	// cluster.Cluster.RateLimiter). Its errors are answered 500
	// server_error.
	RateLimiter ratelimit.Limiter
	// SessionIdle and SessionMax bound the SSO session (defaults 2h, 12h).
	SessionIdle time.Duration
	SessionMax  time.Duration
	// CodeTTL is the authorization code lifetime (default 60s).
	CodeTTL time.Duration
	// SMSEnabled shows the text-message option on the sign-in page. It is
	// set by New when SMS is.
	SMSEnabled bool
	// SMS sends text-message sign-in codes (internal/sms); nil turns
	// text-message sign-in off.
	SMS sms.Sender
	// KEK seals TOTP secrets before they are replicated, and opens them and
	// the browser key (nil: stored with the clear marker, see internal/kek).
	KEK *kek.KEK
	// ReadIndex, when set, makes liveness checks linearizable: it returns
	// once this node has applied every write acknowledged anywhere in the
	// cluster before the call (a raft read index), or an error when no
	// leader can vouch for that (the caller answers 503). Nil: local reads
	// (a single node, where they are already current).
	ReadIndex func(ctx context.Context) error
}

// Provider serves the OIDC surface (docs/openapi/oidc.json).
type Provider struct {
	cfg    Config
	log    *slog.Logger
	issuer *url.URL
	secure bool // cookies get Secure: the issuer is https

	boxMu sync.Mutex
	box   *seal.Box

	limiter *rateLimiter
	metrics *metrics
	wa      *webauthn.WebAuthn // passkeys; the relying-party id is the issuer's host
	tokens  *tokenCache        // verified access tokens (bearer.go)
	dirs    directoryClients   // one client per directory (directory.go)
}

// New checks cfg and returns a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.State == nil || cfg.Applier == nil || cfg.Keys == nil || cfg.UI == nil || cfg.Hasher == nil {
		return nil, errors.New("oidc: State, Applier, Keys, UI and Hasher are required")
	}
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Host == "" {
		return nil, errors.New("oidc: Issuer must be an absolute URL")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RateLimit == "" {
		cfg.RateLimit = "5/60s"
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = 2 * time.Hour
	}
	if cfg.SessionMax == 0 {
		cfg.SessionMax = 12 * time.Hour
	}
	if cfg.CodeTTL == 0 {
		cfg.CodeTTL = 60 * time.Second
	}
	if cfg.SMS != nil {
		cfg.SMSEnabled = true
	}
	p := &Provider{cfg: cfg, log: cfg.Logger, issuer: u, secure: u.Scheme == "https"}
	if p.limiter, err = newRateLimiter(cfg.RateLimit, cfg.RateLimiter, cfg.Now); err != nil {
		return nil, err
	}
	p.metrics = newMetrics(cfg.Registerer)
	p.tokens = newTokenCache(tokenCacheSize)
	if net.ParseIP(u.Hostname()) == nil {
		if p.wa, err = newWebAuthn(u); err != nil {
			return nil, err
		}
	} else {
		// WebAuthn relying-party ids are domain names: with an IP address
		// issuer (the default http://127.0.0.1:8080) passkeys are off.
		p.log.Info("passkeys are off: the issuer's host is an IP address, not a domain name", "issuer", cfg.Issuer)
	}
	return p, nil
}

// Register mounts every protocol route on mux.
func (p *Provider) Register(mux *http.ServeMux) {
	p.registerAuthorize(mux)
	p.registerAccount(mux)
	p.registerToken(mux)
}

// errUnavailable: the cluster could not confirm the state is current (no
// quorum, leader unreachable). Answered with each endpoint's documented 503.
var errUnavailable = errors.New("oidc: cluster unavailable")

// linearize waits until the local state reflects every write acknowledged
// before now anywhere in the cluster.
func (p *Provider) linearize(ctx context.Context) error {
	if p.cfg.ReadIndex == nil {
		return nil
	}
	if err := p.cfg.ReadIndex(ctx); err != nil {
		p.log.Warn("read index failed", "err", err)
		return errUnavailable
	}
	return nil
}

// catchUp reports whether a read index has just brought this node up to
// date with the cluster, so that a read that found nothing may find it
// now (false on a single node, where reads are current already, and when
// the cluster cannot vouch).
func (p *Provider) catchUp(ctx context.Context) bool {
	return p.cfg.ReadIndex != nil && p.linearize(ctx) == nil
}

// now is the provider's clock in UTC.
func (p *Provider) now() time.Time { return p.cfg.Now().UTC() }

// ErrNoBrowserKey: the cluster-wide browser key has not been replicated yet
// (a node that just started); pages answer 503.
var ErrNoBrowserKey = errors.New("oidc: browser key not available yet")

// BrowserKeyAAD is the additional data the browser key is sealed with
// (kek.Seal) before it is replicated.
const BrowserKeyAAD = "secret/" + fsm.SecretBrowserKey

// OpenBrowserKey returns the browser key from its stored form: a kek
// record (sealed, or clear without a KEK), or the bare 32 bytes written
// before secrets were sealed (its kek record, clear or sealed, is never
// 32 bytes long).
func OpenBrowserKey(k *kek.KEK, stored []byte) ([]byte, error) {
	if len(stored) == seal.KeySize {
		return stored, nil
	}
	key, err := k.Open(stored, BrowserKeyAAD)
	if err != nil {
		return nil, fmt.Errorf("oidc: open browser key: %w", err)
	}
	return key, nil
}

// sealer returns the Box for browser state, loading the replicated key on
// first use.
func (p *Provider) sealer() (*seal.Box, error) {
	p.boxMu.Lock()
	defer p.boxMu.Unlock()
	if p.box != nil {
		return p.box, nil
	}
	stored, err := p.cfg.State.Secret(fsm.SecretBrowserKey)
	if err != nil {
		return nil, ErrNoBrowserKey
	}
	key, err := OpenBrowserKey(p.cfg.KEK, stored)
	if err != nil {
		return nil, err
	}
	b, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	p.box = b
	return b, nil
}

// Error is a protocol error: Code is the OAuth error code, Description the
// constant text the client sees, Status the HTTP status where one applies.
type Error struct {
	Code        string
	Description string
	Status      int
}

func (e *Error) Error() string {
	if e.Description == "" {
		return e.Code
	}
	return e.Code + ": " + e.Description
}
