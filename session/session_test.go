package session

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

func newManager(t *testing.T, issuer string, k *kek.KEK) (*Manager, *fsmtest.Applier) {
	t.Helper()
	a := fsmtest.New(t)
	m, err := New(Config{Issuer: issuer, State: a.State(), KEK: k})
	if err != nil {
		t.Fatal(err)
	}
	return m, a
}

func TestCookieNames(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		secure     bool
		want       string
	}{
		{SSOCookie, "/", false, "oidcd_session"},
		{SSOCookie, "/", true, "__Host-oidcd_session"},
		{AuthzCookie, AuthzCookiePath, true, "__Secure-oidcd_authz"},
		{AuthzCookie, AuthzCookiePath, false, "oidcd_authz"},
		{CSRFCookie, "/", true, "__Host-oidcd_csrf"},
	} {
		if got := CookieName(tc.name, tc.path, tc.secure); got != tc.want {
			t.Errorf("CookieName(%q, %q, %v) = %q, want %q", tc.name, tc.path, tc.secure, got, tc.want)
		}
	}
}

// TestCookieFlags: every cookie is HttpOnly and SameSite=Lax, Secure
// exactly when the issuer is https, and a junk CSRF cookie is replaced.
func TestCookieFlags(t *testing.T) {
	for _, issuer := range []string{"http://127.0.0.1:8080", "https://idp.example"} {
		m, _ := newManager(t, issuer, nil)
		secure := m.Secure()
		if want := issuer[:5] == "https"; secure != want {
			t.Fatalf("%s: Secure %v, want %v", issuer, secure, want)
		}
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName(CSRFCookie, "/", secure), Value: "junk"})
		tok := m.CSRFToken(w, r)
		if !authn.IsCSRFToken(tok) {
			t.Fatalf("token %q", tok)
		}
		cs := w.Result().Cookies()
		if len(cs) != 1 {
			t.Fatalf("cookies: %v", cs)
		}
		c := cs[0]
		if c.Name != CookieName(CSRFCookie, "/", secure) || c.Value != tok || !c.HttpOnly || c.Secure != secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
			t.Errorf("cookie %+v", c)
		}
	}
}

// TestBrowserKey: without a key the Box answers ErrNoBrowserKey; once the
// leader created it (sealed under the KEK) it opens, and a key stored as
// the bare 32 bytes of an older release opens too.
func TestBrowserKey(t *testing.T) {
	k, err := kek.New(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	m, a := newManager(t, "https://idp.example", k)
	if _, err := m.Box(); !errors.Is(err, ErrNoBrowserKey) {
		t.Fatalf("Box before the key: got %v, want ErrNoBrowserKey", err)
	}
	if clear, err := m.CheckBrowserKey(); clear || err != nil {
		t.Fatalf("CheckBrowserKey before the key: %v %v", clear, err)
	}
	if err := m.EnsureBrowserKey(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	stored, err := a.State().Secret(fsm.SecretBrowserKey)
	if err != nil || !kek.Sealed(stored) {
		t.Fatalf("stored key: sealed %v, %v", kek.Sealed(stored), err)
	}
	if clear, err := m.CheckBrowserKey(); clear || err != nil {
		t.Fatalf("CheckBrowserKey: %v %v", clear, err)
	}
	if _, err := m.Box(); err != nil {
		t.Fatalf("Box: %v", err)
	}
	if _, err := OpenBrowserKey(nil, stored); err == nil {
		t.Error("a sealed key opened without the KEK")
	}
	bare := bytes.Repeat([]byte{7}, 32)
	if got, err := OpenBrowserKey(nil, bare); err != nil || !bytes.Equal(got, bare) {
		t.Errorf("bare key: got %x, %v", got, err)
	}
}

// TestLifetimes: an SSO session ends idle Idle after its use, never after
// its end, and for good Max after it began; zero takes the defaults.
func TestLifetimes(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		idle, max      time.Duration
		wantIdle, want time.Duration
	}{
		{"defaults", 0, 0, 2 * time.Hour, 12 * time.Hour},
		{"configured", time.Minute, time.Hour, time.Minute, time.Hour},
		{"idle beyond max", 3 * time.Hour, time.Hour, time.Hour, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{Issuer: "http://127.0.0.1", State: fsmtest.New(t).State(), Idle: tc.idle, Max: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			idle, end := m.Lifetimes(now)
			if got := idle.Sub(now); got != tc.wantIdle {
				t.Errorf("idle: got %s, want %s", got, tc.wantIdle)
			}
			if got := end.Sub(now); got != tc.want {
				t.Errorf("end: got %s, want %s", got, tc.want)
			}
			if got := m.IdleUntil(end.Add(-time.Second), end); !got.Equal(end) {
				t.Errorf("IdleUntil near the end: got %s, want %s", got, end)
			}
		})
	}
}

// TestLive: the cookie's secret finds its SSO session while it is live
// (Live) and as long as the store holds it (Named); no cookie, a junk or
// overlong one, or an unknown secret find nothing.
func TestLive(t *testing.T) {
	m, a := newManager(t, "http://127.0.0.1", nil)
	now := time.Now().UTC().Truncate(time.Second)
	apply := func(typ fsm.Type, v any) {
		t.Helper()
		res, err := a.Apply(context.Background(), fsm.MustCommand(typ, v))
		if err != nil || res.Err != nil {
			t.Fatalf("%s: %v %v", typ, err, res.Err)
		}
	}
	const user, sid = "1a000000-0000-4000-8000-000000000001", "5a000000-0000-4000-8000-000000000001"
	apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: user, Email: "ann@example.com", CreatedAt: now}})
	secret := authn.NewID()
	idle, end := m.Lifetimes(now)
	apply(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: authn.HashToken(secret), Session: fsm.SSOSession{
		ID: sid, UserID: user, AuthTime: now, CreatedAt: now, LastSeen: now, IdleExpiresAt: idle, ExpiresAt: end,
	}})
	w := httptest.NewRecorder()
	m.SetSSOCookie(w, secret, end)
	withCookie := func(v string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if v != "" {
			r.AddCookie(&http.Cookie{Name: SSOCookie, Value: v})
		}
		return r
	}
	if c := w.Result().Cookies(); len(c) != 1 || c[0].Name != SSOCookie || c[0].Value != secret || c[0].Path != "/" {
		t.Fatalf("SSO cookie: %+v", c)
	}
	for _, tc := range []struct {
		name, cookie string
		at           time.Time
		live, named  bool
	}{
		{"live", secret, now, true, true},
		{"idle", secret, idle.Add(time.Second), false, true},
		{"no cookie", "", now, false, false},
		{"unknown", authn.NewID(), now, false, false},
		{"overlong", secret + strings.Repeat("A", 64), now, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u, live, err := m.Live(withCookie(tc.cookie), tc.at, nil)
			if err != nil || live != tc.live || (live && (s.ID != sid || u.ID != user)) {
				t.Errorf("Live: got %v %q %q %v, want %v", live, s.ID, u.ID, err, tc.live)
			}
			s, named, err := m.Named(withCookie(tc.cookie))
			if err != nil || named != tc.named || (named && s.ID != sid) {
				t.Errorf("Named: got %v %q %v, want %v", named, s.ID, err, tc.named)
			}
		})
	}
}

// TestBind: the first form of a request reads (or sets) the CSRF cookie
// once, and every pending request sealed in that request is bound to it.
func TestBind(t *testing.T) {
	m, _ := newManager(t, "http://127.0.0.1", nil)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/authorize", nil)
	var turn authn.Turn
	var a, b authn.Pending
	tok := m.Bind(w, r, &turn, &a, authn.StageSignIn)
	if !authn.IsCSRFToken(tok) || turn.CSRF != tok || a.CSRF != tok || a.Stage != authn.StageSignIn {
		t.Fatalf("first bind: token %q, turn %q, pending %+v", tok, turn.CSRF, a)
	}
	if again := m.Bind(w, r, &turn, &b, authn.StageMFA); again != tok || b.CSRF != tok || b.Stage != authn.StageMFA {
		t.Errorf("second bind: got %q %+v, want %q", again, b, tok)
	}
	if n := len(w.Result().Cookies()); n != 1 {
		t.Errorf("set %d CSRF cookies, want 1", n)
	}
}

// TestCSRFOK: a form passes only when its field and its sealed step carry
// the browser's CSRF cookie.
func TestCSRFOK(t *testing.T) {
	m, _ := newManager(t, "https://idp.example", nil)
	tok, other := authn.NewID(), authn.NewID()
	r := httptest.NewRequest(http.MethodPost, "/authorize", nil)
	r.AddCookie(&http.Cookie{Name: CookieName(CSRFCookie, "/", true), Value: tok})
	for _, tc := range []struct {
		name, field, sealed string
		want                bool
	}{
		{"all one", tok, tok, true},
		{"field of another", other, tok, false},
		{"step of another browser", tok, other, false},
		{"no field", "", tok, false},
	} {
		if got := m.CSRFOK(r, tc.field, tc.sealed); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if m.CSRFOK(httptest.NewRequest(http.MethodPost, "/", nil), tok, tok) {
		t.Error("no cookie: passed")
	}
}
