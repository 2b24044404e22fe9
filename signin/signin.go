package signin

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/sms"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/webui"
)

// Config wires the sign-in to one node.
type Config struct {
	Issuer  string // {base_url}, no trailing slash
	State   *fsm.State
	Applier fsm.Applier
	UI      *webui.UI
	Hasher  *password.Hasher
	Now     func() time.Time
	Logger  *slog.Logger
	// Registerer receives the sign-in metrics (nil: none).
	Registerer prometheus.Registerer
	// Sessions is the browser session (package session): cookies and the
	// sealer of the steps, shared with the authorization flow.
	Sessions *session.Manager
	// SMS sends text-message sign-in codes (internal/sms); nil turns
	// text-message sign-in off.
	SMS sms.Sender
	// KEK seals TOTP secrets before they are replicated, and opens them
	// and the directories' bind passwords (nil: stored with the clear
	// marker, see internal/kek).
	KEK *kek.KEK
	// ReadIndex, when set, makes lock and session checks linearizable: it
	// returns once this node has applied every write acknowledged anywhere
	// in the cluster before the call, or an error when no leader can vouch
	// for that. Nil: local reads (a single node).
	ReadIndex func(ctx context.Context) error
	// Mail turns on the pages of the people's own way in (selfservice.go):
	// a forgotten password and its reset, verified addresses and a new
	// address on /account, registration and invitations. node sets it
	// when messages can go out (an SMTP server or an outbox file); with
	// it false those paths answer 404 and no page links to them.
	Mail bool
	// Federation talks to the site's upstream providers (nil: no provider
	// is offered, and a sign-in never leaves for one).
	Federation *federation.Client
	// UpstreamSignOut, when set, is where /account's sign-out goes on
	// after it ended the browser's SSO session sso: the end-session URL of
	// the upstream provider the session was opened through, when that
	// provider has end_upstream_session (logout builds it, as for an
	// application's sign-out); ok false when the sign-out ends here.
	UpstreamSignOut func(r *http.Request, sso fsm.SSOSession) (location string, ok bool)
}

// Signin serves the interactive sign-in steps of /authorize (Step) and
// the /account page (Register).
type Signin struct {
	cfg        Config
	log        *slog.Logger
	issuer     *url.URL
	smsEnabled bool // the sign-in page offers text messages: SMS is set

	// sessions holds the cookies and seals the steps.
	sessions *session.Manager
	metrics  *metrics
	fed      *fedMetrics
	wa       *webauthn.WebAuthn // passkeys; the relying-party id is the issuer's host
	dirs     directoryClients   // one client per directory (directory.go)
	brands   brandCache         // BrandForOrg's
	// floor is answerFloor (selfservice.go); tests that do not time it
	// set it to 0.
	floor time.Duration
}

// New checks cfg and returns a Signin.
func New(cfg Config) (*Signin, error) {
	if cfg.State == nil || cfg.Applier == nil || cfg.UI == nil || cfg.Hasher == nil || cfg.Sessions == nil {
		return nil, errors.New("signin: State, Applier, UI, Hasher and Sessions are required")
	}
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Host == "" {
		return nil, errors.New("signin: Issuer must be an absolute URL")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Signin{cfg: cfg, log: cfg.Logger, issuer: u, sessions: cfg.Sessions, smsEnabled: cfg.SMS != nil, floor: answerFloor}
	p.metrics = newMetrics(cfg.Registerer)
	p.fed = newFedMetrics(cfg.Registerer)
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

// Register mounts /account and the brandings' logos and stylesheets
// (branding.go) on mux, and with Mail the self-service pages
// (selfservice.go). The steps of /authorize are reached through Step,
// from the authorization flow.
func (p *Signin) Register(mux *http.ServeMux) {
	p.registerAccount(mux)
	p.registerBranding(mux)
	if p.cfg.Federation != nil {
		mux.HandleFunc("POST "+authn.PathFederation+"{slug}/backchannel-logout", p.handleUpstreamLogout)
	}
	if p.cfg.Mail {
		p.registerSelfService(mux)
	}
}

// now is the sign-in's clock in UTC.
func (p *Signin) now() time.Time { return p.cfg.Now().UTC() }

// catchUp reports whether a read index has just brought this node up to
// date with the cluster, so that a read that found something (a lock, no
// session) may find otherwise now (false on a single node, where reads
// are current already, and when the cluster cannot vouch).
func (p *Signin) catchUp(ctx context.Context) bool {
	if p.cfg.ReadIndex == nil {
		return false
	}
	if err := p.cfg.ReadIndex(ctx); err != nil {
		p.log.Warn("read index failed", "err", err)
		return false
	}
	return true
}

// cookieValue is the value of the first cookie called name (of path), ""
// if none.
func (p *Signin) cookieValue(r *http.Request, name, path string) string {
	return p.sessions.Cookie(r, name, path)
}

// browserSession finds the browser's usable SSO session
// (session.Manager.Live), catching up once when the cookie names a
// session not found. err is only for a store problem.
func (p *Signin) browserSession(r *http.Request, now time.Time) (fsm.SSOSession, fsm.User, bool, error) {
	return p.sessions.Live(r, now, func() bool { return p.catchUp(r.Context()) })
}

// flow is one turn of the sign-in inside /authorize.
type flow struct {
	p    *Signin
	w    http.ResponseWriter
	r    *http.Request
	now  time.Time
	st   *authn.Step
	pend *authn.Pending

	// The browser's usable SSO session and its person (hasSession).
	sess       fsm.SSOSession
	user       fsm.User
	hasSession bool

	// done: the turn authenticated (or found the session gone) and the
	// flow goes on; false: the turn answered with a page.
	done bool

	lang language.Tag // of the pages, once language chose it
}

// Step runs one turn of the sign-in for the authorization flow: with a
// nil st.Form it shows the page st.Show names (the sign-in form, or the
// second-factor page for the session sess of person u); with a form it
// handles the posted step of st.Pending.Stage. ok is false when it has
// answered. Otherwise the flow goes on with the session and person
// returned: the one just opened or stepped up, or none (a zero session)
// when the browser's session ended meanwhile.
//
// sess is the browser's usable session (zero for none) and u its person.
// A Step never redirects, issues a code or signs a token.
func (p *Signin) Step(w http.ResponseWriter, r *http.Request, st *authn.Step, sess fsm.SSOSession, u fsm.User) (fsm.SSOSession, fsm.User, bool) {
	if st.Turn == nil {
		st.Turn = &authn.Turn{}
	}
	f := &flow{p: p, w: w, r: r, now: p.now(), st: st, pend: st.Pending, sess: sess, user: u, hasSession: sess.ID != ""}
	if st.Form == nil {
		switch st.Show {
		case authn.StageMFA:
			fac, err := p.cfg.State.Factors(f.sess.UserID)
			if err != nil && !errors.Is(err, fsm.ErrNotFound) {
				f.unavailable("factors: " + err.Error())
				break
			}
			f.showSecondFactor(http.StatusOK, fac, "")
		default:
			f.firstSignIn()
		}
		return fsm.SSOSession{}, fsm.User{}, false
	}
	switch f.pend.Stage {
	case authn.StageSignIn:
		f.signIn(st.Form)
	case authn.StageMFA:
		f.secondFactor(st.Form)
	case authn.StageSMSCode:
		f.smsCode(st.Form)
	case authn.StageFederated:
		f.federated(st.Form)
	default:
		f.page(http.StatusBadRequest, authn.MsgBadRequest, "not a sign-in stage: "+f.pend.Stage)
	}
	if !f.done {
		return fsm.SSOSession{}, fsm.User{}, false
	}
	if !f.hasSession {
		return fsm.SSOSession{}, fsm.User{}, true
	}
	return f.sess, f.user, true
}

// proceed hands the request back to the flow.
func (f *flow) proceed() { f.done = true }

// reference is the id quoted on error pages and in the log: the flow's
// (authn.Turn.Reference).
func (f *flow) reference() string { return f.st.Reference(f.r) }

// page shows the error page, never a redirect, with the constant message
// of the catalog key message and logs the real reason under the
// reference it shows.
func (f *flow) page(status int, message, reason string) {
	ref := f.reference()
	f.p.log.Warn("authorize: error page", "status", status, "reason", httpx.LogValue(reason), "reference", ref)
	f.p.cfg.UI.Error(f.w, status, webui.ErrorPage{Frame: f.frame(), Message: f.text(message), Reference: ref})
}

// unavailable is the 503 page for store and key problems.
func (f *flow) unavailable(reason string) {
	ref := f.reference()
	f.p.log.Error("authorize: unavailable", "reason", reason, "reference", ref)
	f.p.cfg.UI.Error(f.w, http.StatusServiceUnavailable, webui.ErrorPage{
		Frame: webui.Frame{Lang: f.language()}, Title: f.text(authn.TitleUnavailable), Message: f.text(authn.MsgUnavailable), Reference: ref,
	})
}

// common seals the pending request for a form of stage and returns the
// data every form carries. ok is false when it has answered 503.
func (f *flow) common(stage, action string) (webui.Common, bool) {
	csrf := f.p.sessions.Bind(f.w, f.r, f.st.Turn, f.pend, stage)
	step, err := f.st.Seal()
	if err != nil {
		f.unavailable("seal step: " + err.Error())
		return webui.Common{}, false
	}
	return webui.Common{Frame: f.frame(), AppName: f.st.AppName, CSRFToken: csrf, Action: action, Step: step}, true
}

// sameSession reports whether the browser's usable session is the one that
// authenticated this pending request.
func (f *flow) sameSession() bool { return f.pend.SameSession(f.hasSession, f.sess.ID) }
