package oidc

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/ratelimit"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/session"
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

// Authentication strength values (acr) and methods (amr), as the sign-in
// records them (internal/authn).
const (
	ACRMFA   = authn.ACRMFA
	ACRPwd   = authn.ACRPwd
	ACRPhone = authn.ACRPhone

	AMRPassword = authn.AMRPassword
	AMRPasskey  = authn.AMRPasskey
	AMROTP      = authn.AMROTP
	AMRRecovery = authn.AMRRecovery
	AMRSMS      = authn.AMRSMS
)

// Steps is the interactive sign-in as the authorization flow sees it
// (package signin implements it; node hands it in). Step runs one turn:
// with a nil st.Form it answers with the page st.Show names, the sign-in
// form or the second-factor page for the browser's session sess of person
// u; with a form it handles the posted step of st.Pending.Stage. ok false:
// it has answered. Otherwise the flow goes on with the session and person
// returned (the one just opened or stepped up; a zero session when the
// browser's session ended meanwhile), having set st.Pending's SSOID and
// StepUp and st.CSRF. A Step never redirects to a client: only the flow
// issues codes.
type Steps interface {
	Step(w http.ResponseWriter, r *http.Request, st *authn.Step, sess fsm.SSOSession, u fsm.User) (fsm.SSOSession, fsm.User, bool)
	// Frame is the language and branding of the flow's own pages (picker,
	// consent, errors): those of the sign-in's pages for clientID.
	Frame(r *http.Request, clientID, uiLocales string) webui.Frame
}

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
	// Steps is the interactive sign-in (package signin).
	Steps  Steps
	Now    func() time.Time
	Logger *slog.Logger
	// Registerer receives the protocol metrics (nil: none).
	Registerer prometheus.Registerer

	// Sessions is the browser session (package session): cookies, the
	// sealer of the pending request, the browser key.
	Sessions *session.Manager

	// RateLimit is "N/duration" per client and address (default "5/60s")
	// or "off".
	RateLimit string
	// RateLimiter, when set and RateLimit is not "off", decides instead of
	// a limiter of this provider's own (the cluster's, kept on its leader:
	// cluster.Cluster.RateLimiter). Its errors are answered 500
	// server_error.
	RateLimiter ratelimit.Limiter
	// CodeTTL is the authorization code lifetime (default 60s).
	CodeTTL time.Duration
	// ReadIndex, when set, makes liveness checks linearizable: it returns
	// once this node has applied every write acknowledged anywhere in the
	// cluster before the call (a raft read index), or an error when no
	// leader can vouch for that (the caller answers 503). Nil: local reads
	// (a single node, where they are already current).
	ReadIndex func(ctx context.Context) error

	// AdminACR is the least acr of a sign-in through the built-in client
	// (AdminClientID): a weaker session is asked for its second factor.
	// Default ACRMFA.
	AdminACR string
	// AdminRedirectURIs, when set, names further redirect URIs of the
	// built-in client, matched exactly: the console's callback on the
	// admin listener when the console is served there (asked at each
	// request: the listener's port may be known only once it listens).
	// {Issuer}/console/callback and the loopback callbacks are always its
	// own.
	AdminRedirectURIs func() []string
}

// Provider serves the OIDC surface (docs/openapi/oidc.json).
type Provider struct {
	cfg    Config
	log    *slog.Logger
	issuer *url.URL
	// sessions holds the cookies and seals the pending request.
	sessions *session.Manager

	limiter *rateLimiter
	metrics *metrics
	tokens  *tokenCache // verified access tokens (bearer.go)
	origins *origins    // every client's web origins (cors.go)
}

// New checks cfg and returns a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.State == nil || cfg.Applier == nil || cfg.Keys == nil || cfg.UI == nil || cfg.Steps == nil || cfg.Sessions == nil {
		return nil, errors.New("oidc: State, Applier, Keys, UI, Steps and Sessions are required")
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
	if cfg.AdminACR == "" {
		cfg.AdminACR = ACRMFA
	}
	if acrRank(cfg.AdminACR) == 0 {
		return nil, errors.New("oidc: AdminACR must be one of " + ACRPhone + ", " + ACRPwd + ", " + ACRMFA)
	}
	if cfg.CodeTTL == 0 {
		cfg.CodeTTL = 60 * time.Second
	}
	p := &Provider{cfg: cfg, log: cfg.Logger, issuer: u, sessions: cfg.Sessions}
	if p.limiter, err = newRateLimiter(cfg.RateLimit, cfg.RateLimiter, cfg.Now); err != nil {
		return nil, err
	}
	p.metrics = newMetrics(cfg.Registerer)
	p.tokens = newTokenCache(tokenCacheSize)
	p.origins = newOrigins(cfg.State, cfg.Logger)
	return p, nil
}

// Register mounts every protocol route on mux (/account is package
// signin's).
func (p *Provider) Register(mux *http.ServeMux) {
	p.registerAuthorize(mux)
	p.registerToken(mux)
	p.registerCORS(mux)
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
