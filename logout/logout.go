package logout

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/webui"
)

// Applier is the write path (fsm.Applier).
type Applier = fsm.Applier

// Keys signs logout tokens and verifies id_token_hint.
type Keys interface {
	Sign(claims any, typ string) ([]byte, error)
	Verify(token []byte) (claims []byte, err error)
}

var _ Keys = (*keys.Manager)(nil)

// Defaults of the tunables in Config and of the sender.
const (
	DefaultFrontChannelWait = 2 * time.Second
	// DefaultSendTimeout bounds one POST to a receiver.
	DefaultSendTimeout = 5 * time.Second
	// DefaultConcurrency is how many delivery attempts are in flight at
	// most, on the leader, for the whole cluster.
	DefaultConcurrency = 16
	// DefaultPerClient and DefaultPerHost are how many of them may go to
	// one client, and to one receiving host (the host:port of the
	// back-channel URI, which several clients may share). A receiver that
	// never answers holds at most 4 slots for up to DefaultSendTimeout
	// each; it takes four such hosts to fill the pool.
	DefaultPerClient = 4
	DefaultPerHost   = 4
	// DefaultMaxAttempts is how many times a delivery is tried in all
	// before it is abandoned.
	DefaultMaxAttempts = 5
	// LogoutTokenLifetime is exp - iat of a logout token.
	LogoutTokenLifetime = 120 * time.Second
)

// DefaultBackoff returns the wait before each retry: after the first
// failed attempt 1s, then 2s, 4s and 8s (four retries, five attempts in
// all). A fresh slice each time, so no node can change another's.
func DefaultBackoff() []time.Duration {
	return []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
}

// Config wires logout to one node.
type Config struct {
	Issuer  string
	State   *fsm.State
	Applier Applier
	Keys    Keys
	UI      *webui.UI
	// Frame, when set, is the language and branding of the pages (the
	// sign-in's pages' for the client, else the site's: package signin's
	// Frame); nil: English, unbranded.
	Frame      func(r *http.Request, clientID string) webui.Frame
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Sessions is the browser session (package session): logout reads
	// and clears the SSO cookie through it.
	Sessions *session.Manager
	// FrontChannelWait bounds how long a logout waits for its back-channel
	// deliveries before redirecting (default 2s; negative: do not wait).
	FrontChannelWait time.Duration
	// ReadIndex, when set, brings the local state up to every write
	// acknowledged anywhere before a logout decides what to end (a lagging
	// node must not redirect having ended nothing). Nil: local reads.
	ReadIndex func(ctx context.Context) error
	// HTTPClient sends deliveries (default: 5s timeout, no redirects).
	HTTPClient *http.Client
	// AdminClientID is the provider's built-in client of the console and
	// the CLI (oidc.AdminClientID), which the client store never holds.
	// Its ID token's sid names the SSO session itself (it opens no app
	// session), and it registers no post-logout redirect: a logout with
	// its hint ends that SSO session, which stops its admin access tokens,
	// and shows the signed-out page. Empty: such a hint is refused as an
	// unknown client.
	AdminClientID string
	// Upstreams, when set, ends the person's session at the upstream
	// provider too when the SSO session a sign-out ends was opened through
	// a provider with end_upstream_session (upstream.go); node hands in
	// the sign-in's federation client. Nil: never, and
	// /federation/{slug}/logged-out is not served.
	Upstreams Upstreams
}

// Service is RP-initiated logout and back-channel delivery.
type Service struct {
	cfg     Config
	log     *slog.Logger
	client  *http.Client
	metrics *metrics
	notify  chan struct{}

	// changed is closed and replaced by every Notify, so front-channel
	// waiters wake when a delivery outcome is applied.
	changedMu sync.Mutex
	changed   chan struct{}

	// Sender tuning; New sets the defaults, package tests shorten them.
	tick        time.Duration   // rescan period without a Notify
	sendTimeout time.Duration   // one POST
	concurrency int             // attempts in flight
	perClient   int             // attempts in flight to one client
	perHost     int             // attempts in flight to one receiving host
	scanLimit   int             // pending deliveries read per page
	scanPages   int             // pages read per dispatch
	backoff     []time.Duration // wait before retry i+1; the last repeats
	maxAttempts int             // attempts in all before abandoning
	pollEvery   time.Duration   // front-channel wait fallback poll
}

// New returns a Service. It registers the back-channel metrics on
// cfg.Registerer when set.
func New(cfg Config) (*Service, error) {
	if cfg.State == nil || cfg.Applier == nil || cfg.Keys == nil || cfg.UI == nil {
		return nil, errors.New("logout: State, Applier, Keys and UI are required")
	}
	if cfg.Issuer == "" || cfg.Sessions == nil {
		return nil, errors.New("logout: Issuer and Sessions are required")
	}
	cfg.Issuer = strings.TrimRight(cfg.Issuer, "/")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FrontChannelWait == 0 {
		cfg.FrontChannelWait = DefaultFrontChannelWait
	}
	s := &Service{
		cfg:         cfg,
		log:         cfg.Logger.With("component", "logout"),
		client:      cfg.HTTPClient,
		notify:      make(chan struct{}, 1),
		changed:     make(chan struct{}),
		tick:        time.Second,
		sendTimeout: DefaultSendTimeout,
		concurrency: DefaultConcurrency,
		perClient:   DefaultPerClient,
		perHost:     DefaultPerHost,
		scanLimit:   scanLimit,
		scanPages:   scanPages,
		backoff:     DefaultBackoff(),
		maxAttempts: DefaultMaxAttempts,
		pollEvery:   20 * time.Millisecond,
	}
	if s.client == nil {
		s.client = defaultClient()
	}
	m, err := newMetrics(cfg.Registerer, cfg.State)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// defaultClient posts deliveries: its own transport (no shared global
// state), a 5 s timeout, and redirects are answers, not hops to follow (a
// 3xx is a failed delivery).
func defaultClient() *http.Client {
	return &http.Client{
		Transport:     http.DefaultTransport.(*http.Transport).Clone(),
		Timeout:       DefaultSendTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Register mounts GET and POST /logout, and with Config.Upstreams the
// return from an upstream's end session, GET
// /federation/{slug}/logged-out.
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Path, s.handleGet)
	mux.HandleFunc("POST "+Path, s.handlePost)
	if s.cfg.Upstreams != nil {
		mux.HandleFunc(loggedOutPattern, s.handleLoggedOut)
	}
}

// Notify wakes the sender: deliveries may be pending. It never blocks. It
// also wakes logouts waiting for their deliveries (FrontChannelWait).
// OnApply calls it after every applied command that may create or finish
// a delivery.
func (s *Service) Notify() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
	s.changedMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changedMu.Unlock()
}

// OnApply tells the Service which command types the FSM just applied;
// wire it into fsm.FSM.OnApply (as keys.Manager.OnApply). It calls
// Notify when one of them may create or finish a delivery (Wakes). It
// must not block, and does not.
func (s *Service) OnApply(types []fsm.Type) {
	if slices.ContainsFunc(types, Wakes) {
		s.Notify()
	}
}

// Wakes reports whether an applied command of type t may create a
// back-channel delivery or finish one: whatever ends sessions (a logout,
// a deleted person or organization, a changed password or factor, a
// revoked consent, a directory sync, a password reset link followed), a sign-in (which may end the
// sessions it replaces), and a delivery's outcome (front-channel waiters).
func Wakes(t fsm.Type) bool {
	switch t {
	case fsm.TypeEndSSOSession, fsm.TypeStartSSOSession, fsm.TypeDeleteUser, fsm.TypeDeleteOrg, fsm.TypeDeliveryOutcome,
		fsm.TypeUpdateUser, fsm.TypeSetTOTP, fsm.TypeSetRecoveryCodes, fsm.TypeAddPasskey, fsm.TypeRemovePasskey, fsm.TypeRevokeConsent,
		fsm.TypeDirectorySyncBatch, fsm.TypeUseLink:
		return true
	}
	return false
}

// changes returns a channel that is closed by the next Notify.
func (s *Service) changes() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	return s.changed
}

func (s *Service) now() time.Time { return s.cfg.Now() }
