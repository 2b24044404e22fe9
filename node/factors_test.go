package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/testkit/testclock"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// mfaWorld is a provisioned cluster with an SMS outbox and a person, Ann,
// who has a phone, an authenticator app and recovery codes, and Bob, who
// has a password and a phone but no second factor.
type mfaWorld struct {
	world
	c        *testcluster.Cluster
	clock    *testclock.Clock
	outbox   string
	secret   string   // Ann's TOTP secret
	recovery []string // Ann's recovery codes
	annPhone string
	bob      string // Bob's email (password w.password)
	bobPhone string
}

func newMFAWorld(t *testing.T, size int) *mfaWorld {
	return newMFAWorldOpts(t, testcluster.Options{Size: size})
}

func newMFAWorldOpts(t *testing.T, opts testcluster.Options) *mfaWorld {
	t.Helper()
	m := &mfaWorld{clock: testclock.New(time.Now().UTC()), outbox: filepath.Join(t.TempDir(), "sms.jsonl"),
		annPhone: "+15550100001", bob: "bob@example.com", bobPhone: "+15550100002"}
	opts.Now, opts.Verbose = m.clock.Now, os.Getenv("OIDCD_TEST_VERBOSE") != ""
	opts.Configure = func(_ int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.SMSOutbox = m.outbox
	}
	m.c = testcluster.New(t, opts)
	m.world = provision(t, m.c)
	tok := testcluster.AdminToken
	if r := do(t, m.c, "PATCH", "/admin/v1/users/"+m.user, tok, map[string]any{"phone": m.annPhone}, nil); r.StatusCode != 200 {
		t.Fatalf("phone: %d", r.StatusCode)
	}
	var totp struct{ Secret, URI string }
	if r := do(t, m.c, "POST", "/admin/v1/users/"+m.user+"/totp", tok, nil, &totp); r.StatusCode != 201 {
		t.Fatalf("totp: %d", r.StatusCode)
	}
	m.secret = totp.Secret
	var rc struct{ Codes []string }
	if r := do(t, m.c, "POST", "/admin/v1/users/"+m.user+"/recovery-codes", tok, nil, &rc); r.StatusCode != 201 {
		t.Fatalf("recovery codes: %d", r.StatusCode)
	}
	m.recovery = rc.Codes
	var u map[string]any
	do(t, m.c, "POST", "/admin/v1/users", tok, map[string]any{"email": m.bob, "password": m.password, "phone": m.bobPhone}, &u)
	do(t, m.c, "POST", "/admin/v1/memberships", tok, map[string]any{"user_id": u["id"], "org_id": m.orgA}, nil)
	return m
}

// lastSMS is the newest message to phone in the outbox.
func (m *mfaWorld) lastSMS(t *testing.T, phone string) (code string, n int) {
	t.Helper()
	f, err := os.Open(m.outbox)
	if err != nil {
		t.Fatalf("outbox: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var msg struct{ To, Text, Code, SentAt string }
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatalf("outbox line %q: %v", sc.Text(), err)
		}
		if msg.To == phone {
			if !strings.Contains(msg.Text, msg.Code) || len(msg.Code) != 6 {
				t.Fatalf("message %+v", msg)
			}
			code, n = msg.Code, n+1
		}
	}
	return code, n
}

func totpAt(secret string, at time.Time) (string, error) { return factor.TOTPCode(secret, at) }

// totpCode is the current code, after moving the clock to a fresh step.
func (m *mfaWorld) totpCode(t *testing.T) string {
	t.Helper()
	m.clock.Add(31 * time.Second)
	code, err := factor.TOTPCode(m.secret, m.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// how a scripted person answers each page.
type script struct {
	email, password string // the first page, by password...
	phone           string // ...or by text message when set
	second          string // on the second-factor page: "otp", "recovery"
	code            string // the code to type (empty: the right one)
}

// run drives b through an authorization request with extra parameters
// and returns the final redirect to the callback, and the pages seen.
func (m *mfaWorld) run(t *testing.T, b *testcluster.Browser, r *rp, s script, extra ...oauth2.AuthCodeOption) (url.Values, []*testcluster.Page) {
	t.Helper()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption("verifier-" + strings.Repeat("x", 43)), gooidc.Nonce("nonce-0123456789")}, extra...)
	base := r.authBase()
	page := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", opts...)), base)
	var seen []*testcluster.Page
	for i := 0; i < 6 && page.Location() == ""; i++ {
		seen = append(seen, page)
		switch {
		case strings.Contains(page.Body, `name="password"`) && s.phone != "":
			page = b.Submit(page, map[string]string{"phone": s.phone}, "method", "sms")
		case strings.Contains(page.Body, `name="password"`):
			page = b.Submit(page, map[string]string{"email": s.email, "password": s.password}, "method", "password")
		case strings.Contains(page.Body, `autocomplete="one-time-code"`) && !strings.Contains(page.Body, `name="method"`):
			code, _ := m.lastSMS(t, s.phone)
			page = b.Submit(page, map[string]string{"code": code}, "", "")
		case strings.Contains(page.Body, `value="otp"`) || strings.Contains(page.Body, `value="recovery"`):
			code := s.code
			if code == "" && s.second == "otp" {
				code = m.totpCode(t)
			}
			if code == "" && s.second == "recovery" {
				code = m.recovery[0]
			}
			if s.second == "" {
				return nil, append(seen, page)
			}
			page = b.Submit(page, map[string]string{"code": code}, "method", s.second)
			if page.Status == http.StatusBadRequest {
				return nil, append(seen, page)
			}
		case strings.Contains(page.Body, `value="allow"`):
			page = b.Submit(page, nil, "decision", "allow")
		default:
			t.Fatalf("unexpected page %d at %s:\n%s", page.Status, page.URL, page.Body)
		}
		page = b.Follow(page, base)
	}
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), m.cb) {
		t.Fatalf("flow ended at %d %q\n%s", page.Status, page.Location(), page.Body)
	}
	return loc.Query(), seen
}

// idClaims are the ID-token claims these tests look at.
type idClaims struct {
	ACR      string   `json:"acr"`
	AMR      []string `json:"amr"`
	AuthTime int64    `json:"auth_time"`
	SID      string   `json:"sid"`
	Sub      string   `json:"sub"`
}

// exchange redeems the code and verifies the ID token with go-oidc.
func exchange(t *testing.T, r *rp, q url.Values) idClaims {
	t.Helper()
	if q.Get("error") != "" {
		t.Fatalf("redirected error %s: %s", q.Get("error"), q.Get("error_description"))
	}
	tok, err := r.oauth.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption("verifier-"+strings.Repeat("x", 43)))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := r.verifier.Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("verify ID token: %v", err)
	}
	var c idClaims
	if err := idt.Claims(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

func acrValues(v string) oauth2.AuthCodeOption { return oauth2.SetAuthURLParam("acr_values", v) }

const (
	acrMFA   = "urn:service:sso:acr:mfa"
	acrPwd   = "urn:service:sso:acr:pwd"
	acrPhone = "urn:service:sso:acr:phone"
)

// TestSignInPathsGiveTheirACRAndAMR: every way of signing in, asserted on
// the acr and amr of the ID token a real relying party verifies.
func TestSignInPathsGiveTheirACRAndAMR(t *testing.T) {
	m := newMFAWorld(t, 1)
	r := newRP(t, m.c, m.confID, m.confSecret, m.cb, gooidc.ScopeOpenID)
	pwd := script{email: m.email, password: m.password}
	cases := []struct {
		name    string
		s       script
		acr     string
		wantACR string
		wantAMR []string
	}{
		{"password only", pwd, "", acrPwd, []string{"pwd"}},
		{"password + otp", script{email: m.email, password: m.password, second: "otp"}, acrMFA, acrMFA, []string{"pwd", "otp"}},
		{"sms only", script{phone: m.annPhone}, "", acrPhone, []string{"sms"}},
		{"sms + otp", script{phone: m.annPhone, second: "otp"}, acrMFA, acrMFA, []string{"sms", "otp"}},
		{"sms asked for pwd + otp", script{phone: m.annPhone, second: "otp"}, acrPwd, acrMFA, []string{"sms", "otp"}},
		{"phone level asked, password given", pwd, acrPhone, acrPwd, []string{"pwd"}},
		{"mfa or pwd listed: pwd is enough", pwd, acrMFA + " " + acrPwd, acrPwd, []string{"pwd"}},
		{"mfa or phone listed, text message given", script{phone: m.annPhone}, acrMFA + " " + acrPhone, acrPhone, []string{"sms"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var extra []oauth2.AuthCodeOption
			if tc.acr != "" {
				extra = append(extra, acrValues(tc.acr))
			}
			q, _ := m.run(t, testcluster.NewBrowser(t), r, tc.s, extra...)
			c := exchange(t, r, q)
			if c.ACR != tc.wantACR || !slices.Equal(c.AMR, tc.wantAMR) || c.Sub != m.user {
				t.Fatalf("acr %q amr %v sub %s, want %q %v %s", c.ACR, c.AMR, c.Sub, tc.wantACR, tc.wantAMR, m.user)
			}
		})
	}
	t.Run("a recovery code works once, and never for mfa", func(t *testing.T) {
		// A recovery code proves the person but not the strength asked
		// for: access_denied, not a code with acr pwd. The
		// code is spent; the person re-enrols a factor at /account.
		q, _ := m.run(t, testcluster.NewBrowser(t), r, script{email: m.email, password: m.password, second: "recovery", code: m.recovery[0]}, acrValues(acrMFA))
		if q.Get("error") != "access_denied" || q.Get("error_description") != "strong authentication required; no second factor enrolled" {
			t.Fatalf("mfa answered with a recovery code: got %v", q)
		}
		q, pages := m.run(t, testcluster.NewBrowser(t), r, script{email: m.email, password: m.password, second: "recovery", code: m.recovery[0]}, acrValues(acrMFA))
		last := pages[len(pages)-1]
		if q != nil || last.Status != http.StatusBadRequest || !strings.Contains(last.Body, "not correct") {
			t.Fatalf("reused recovery code: %v, page %d", q, last.Status)
		}
	})
	t.Run("an authenticator code works once", func(t *testing.T) {
		code := m.totpCode(t)
		q, _ := m.run(t, testcluster.NewBrowser(t), r, script{email: m.email, password: m.password, second: "otp", code: code}, acrValues(acrMFA))
		exchange(t, r, q)
		q, pages := m.run(t, testcluster.NewBrowser(t), r, script{email: m.email, password: m.password, second: "otp", code: code}, acrValues(acrMFA))
		if last := pages[len(pages)-1]; q != nil || last.Status != http.StatusBadRequest {
			t.Fatalf("replayed code accepted: %v, page %d", q, last.Status)
		}
	})
}

// TestACRValuesErrors: the acr_values errors redirected to the client, and
// prompt=none.
func TestACRValuesErrors(t *testing.T) {
	m := newMFAWorld(t, 1)
	r := newRP(t, m.c, m.confID, m.confSecret, m.cb, gooidc.ScopeOpenID)
	const denied = "strong authentication required; no second factor enrolled"
	cases := []struct {
		name, acr string
		s         script
		err, desc string
	}{
		{"mfa without a second factor", acrMFA, script{email: m.bob, password: m.password}, "access_denied", denied},
		{"pwd of a text-message sign-in without a second factor", acrPwd, script{phone: m.bobPhone}, "access_denied", denied},
		{"unsupported value", "urn:example:gold", script{}, "invalid_request", "unsupported acr value: urn:example:gold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := m.run(t, testcluster.NewBrowser(t), r, tc.s, acrValues(tc.acr))
			if q.Get("error") != tc.err || q.Get("error_description") != tc.desc || q.Get("state") != "state-0123456789" {
				t.Fatalf("got %v", q)
			}
		})
	}
	t.Run("prompt=none that needs a second factor", func(t *testing.T) {
		b := testcluster.NewBrowser(t)
		exchange(t, r, mustQ(m.run(t, b, r, script{email: m.email, password: m.password})))
		q, _ := m.run(t, b, r, script{}, acrValues(acrMFA), oauth2.SetAuthURLParam("prompt", "none"))
		if q.Get("error") != "interaction_required" {
			t.Fatalf("got %v", q)
		}
	})
}

func mustQ(q url.Values, _ []*testcluster.Page) url.Values { return q }

// TestStepUpKeepsTheSID: a session opened by password and raised to mfa
// later keeps its sid; auth_time moves to the second factor.
func TestStepUpKeepsTheSID(t *testing.T) {
	m := newMFAWorld(t, 1)
	r := newRP(t, m.c, m.confID, m.confSecret, m.cb, gooidc.ScopeOpenID)
	b := testcluster.NewBrowser(t)
	first := exchange(t, r, mustQ(m.run(t, b, r, script{email: m.email, password: m.password})))
	q, pages := m.run(t, b, r, script{second: "otp"}, acrValues(acrMFA))
	if strings.Contains(pages[0].Body, `name="password"`) {
		t.Fatal("step-up asked for the password again")
	}
	second := exchange(t, r, q)
	if second.SID != first.SID || second.ACR != acrMFA || !slices.Equal(second.AMR, []string{"pwd", "otp"}) || second.AuthTime <= first.AuthTime {
		t.Fatalf("before %+v, after %+v", first, second)
	}
	// Later requests without acr_values keep the raised session.
	third := exchange(t, r, mustQ(m.run(t, b, r, script{})))
	if third.ACR != acrMFA || third.SID != first.SID {
		t.Fatalf("after step-up: %+v", third)
	}
}

// TestLockoutsAreClusterWide: wrong passwords spread over three nodes lock
// the account; the lock holds through a leader change, is visible and
// clearable in the admin API, and ends by itself.
func TestLockoutsAreClusterWide(t *testing.T) {
	m := newMFAWorld(t, 3)
	r := newRP(t, m.c, m.confID, m.confSecret, m.cb, gooidc.ScopeOpenID)
	attempt := func(nodeIdx int, password string) *testcluster.Page {
		t.Helper()
		b := testcluster.NewBrowser(t)
		au := r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption("verifier-"+strings.Repeat("x", 43)))
		au = strings.Replace(au, r.authBase(), m.c.URL(nodeIdx), 1)
		page := b.Get(au)
		return b.Submit(page, map[string]string{"email": m.email, "password": password}, "method", "password")
	}
	for i := range 10 {
		if p := attempt(i%3, "wrong password"); p.Status != http.StatusBadRequest {
			t.Fatalf("wrong password %d: status %d", i+1, p.Status)
		}
	}
	for i := range 3 {
		if p := attempt(i, m.password); p.Status != http.StatusTooManyRequests {
			t.Fatalf("locked account, right password on node %d: status %d", i, p.Status)
		}
	}
	var lo struct {
		Data []struct{ Key, Kind string }
	}
	do(t, m.c, "GET", "/admin/v1/lockouts", testcluster.AdminToken, nil, &lo)
	if len(lo.Data) != 1 || lo.Data[0].Kind != "password" {
		t.Fatalf("lockouts: %+v", lo)
	}
	leader := m.c.WaitNewLeader()
	m.c.Kill(leader)
	m.c.WaitNewLeader()
	alive := (leader + 1) % 3
	if p := attempt(alive, m.password); p.Status != http.StatusTooManyRequests {
		t.Fatalf("after a leader change: %d", p.Status)
	}
	m.c.Restart(leader)
	if r := do(t, m.c, "DELETE", "/admin/v1/users/"+m.user+"/lockouts", testcluster.AdminToken, nil, nil); r.StatusCode != 204 {
		t.Fatalf("clear: %d", r.StatusCode)
	}
	if p := attempt(alive, m.password); p.Status == http.StatusTooManyRequests || p.Status == http.StatusBadRequest {
		t.Fatalf("after clearing: %d", p.Status)
	}
	for i := range 10 {
		attempt(i%3, "wrong password")
	}
	if p := attempt(alive, m.password); p.Status != http.StatusTooManyRequests {
		t.Fatalf("locked again: %d", p.Status)
	}
	m.clock.Add(16 * time.Minute)
	if p := attempt(alive, m.password); p.Status == http.StatusTooManyRequests || p.Status == http.StatusBadRequest {
		t.Fatalf("16 minutes later: %d", p.Status)
	}
}

// TestTextMessageLimits: sends per number are limited, and a code dies
// after five wrong guesses.
func TestTextMessageLimits(t *testing.T) {
	m := newMFAWorld(t, 1)
	r := newRP(t, m.c, m.confID, m.confSecret, m.cb, gooidc.ScopeOpenID)
	send := func() (*testcluster.Browser, *testcluster.Page) {
		b := testcluster.NewBrowser(t)
		page := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption("verifier-"+strings.Repeat("x", 43)))), r.authBase())
		return b, b.Submit(page, map[string]string{"phone": "+1 (555) 010-0001"}, "method", "sms")
	}
	b, page := send()
	if page.Status != 200 || !strings.Contains(page.Body, `autocomplete="one-time-code"`) {
		t.Fatalf("code page: %d\n%s", page.Status, page.Body)
	}
	for i := range 5 {
		page = b.Submit(page, map[string]string{"code": "000000"}, "", "")
		if i < 4 && page.Status != http.StatusBadRequest {
			t.Fatalf("wrong guess %d: %d", i+1, page.Status)
		}
	}
	right, _ := m.lastSMS(t, m.annPhone)
	if right == "000000" {
		t.Skip("the random code was 000000")
	}
	// The fifth wrong guess locked the number's code entry...
	if p := b.Submit(page, map[string]string{"code": right}, "", ""); p.Status != http.StatusTooManyRequests || !strings.Contains(p.Body, "Too many failed attempts") {
		t.Fatalf("right code after five wrong guesses: %d, want 429", p.Status)
	}
	// ...and killed the code: with the lock cleared, even the right one
	// leads back to the first page, saying so.
	if r := do(t, m.c, "DELETE", "/admin/v1/lockouts/"+url.PathEscape("code:tel"+m.annPhone), testcluster.AdminToken, nil, nil); r.StatusCode != 204 {
		t.Fatalf("clear the lock: %d", r.StatusCode)
	}
	page = b.Submit(page, map[string]string{"code": right}, "", "")
	if page.Status != http.StatusBadRequest || !strings.Contains(page.Body, "expired or was used up") || !strings.Contains(page.Body, `name="password"`) {
		t.Fatalf("right code after five wrong guesses: %d %q\n%s", page.Status, page.Location(), page.Body)
	}
	for range 4 {
		send()
	}
	if _, n := m.lastSMS(t, m.annPhone); n != 5 {
		t.Fatalf("%d messages, want 5", n)
	}
	if _, p := send(); p.Status != http.StatusTooManyRequests {
		t.Fatalf("sixth send: %d", p.Status)
	}
	if _, n := m.lastSMS(t, m.annPhone); n != 5 {
		t.Fatalf("%d messages after the limit, want 5", n)
	}
	// An unknown number gets the same page and no message.
	b = testcluster.NewBrowser(t)
	p := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption("verifier-"+strings.Repeat("x", 43)))), r.authBase())
	p = b.Submit(p, map[string]string{"phone": "+15550199999"}, "method", "sms")
	if p.Status != 200 || !strings.Contains(p.Body, `autocomplete="one-time-code"`) {
		t.Fatalf("unknown number: %d", p.Status)
	}
	if _, n := m.lastSMS(t, "+15550199999"); n != 0 {
		t.Fatal("a message went to a number nobody has")
	}
}

// TestAccountNeedsARecentSignIn: /account changes need an authentication
// at most 15 minutes old; the password given again refreshes the session
// in place (same sid for the apps).
func TestAccountNeedsARecentSignIn(t *testing.T) {
	m := newMFAWorld(t, 1)
	r := newRP(t, m.c, m.confID, m.confSecret, m.cb, gooidc.ScopeOpenID)
	b := testcluster.NewBrowser(t)
	first := exchange(t, r, mustQ(m.run(t, b, r, script{email: m.bob, password: m.password})))
	if p := b.Get(m.c.Issuer() + "/account"); p.Status != 200 || !strings.Contains(p.Body, `value="totp-setup"`) {
		t.Fatalf("fresh session: %d\n%s", p.Status, p.Body)
	}
	m.clock.Add(16 * time.Minute)
	p := b.Get(m.c.Issuer() + "/account")
	if !strings.Contains(p.Body, `name="password"`) || strings.Contains(p.Body, `value="totp-setup"`) {
		t.Fatalf("stale session must sign in again:\n%s", p.Body)
	}
	if p = b.Submit(p, map[string]string{"email": m.bob, "password": "wrong"}, "method", "password"); p.Status != http.StatusBadRequest {
		t.Fatalf("wrong password: %d", p.Status)
	}
	p = b.Submit(p, map[string]string{"email": m.bob, "password": m.password}, "method", "password")
	if !strings.Contains(p.Body, `value="totp-setup"`) {
		t.Fatalf("after signing in again:\n%s", p.Body)
	}
	// Set up an authenticator app through the page.
	p = b.Submit(p, nil, "action", "totp-setup")
	i := strings.Index(p.Body, `id="totp-secret">`)
	if i < 0 {
		t.Fatalf("setup page:\n%s", p.Body)
	}
	secret := p.Body[i+len(`id="totp-secret">`):]
	secret = secret[:strings.Index(secret, "<")]
	if p2 := b.Submit(p, map[string]string{"code": "000000"}, "action", "totp-confirm"); p2.Status != http.StatusBadRequest {
		t.Fatalf("wrong first code: %d", p2.Status)
	}
	code, _ := totpAt(secret, m.clock.Now())
	if p = b.Submit(p, map[string]string{"code": code}, "action", "totp-confirm"); !strings.Contains(p.Body, "authenticator app is set up") {
		t.Fatalf("confirm:\n%s", p.Body)
	}
	// The apps keep their session, and Bob can now reach mfa.
	m.secret = secret
	second := exchange(t, r, mustQ(m.run(t, b, r, script{second: "otp"}, acrValues(acrMFA))))
	if second.SID != first.SID || second.ACR != acrMFA {
		t.Fatalf("before %+v, after %+v", first, second)
	}
}
