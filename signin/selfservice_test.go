package signin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/htmlform"
	"github.com/oidcd/oidcd/session"
)

// The people's own way in, through the real pages: every flow from the
// page a person starts on to the state it leaves, and what an attacker
// tries on the way.

// newMailHarness is the harness with mail on (Config.Mail).
// Its answers do not wait for answerFloor, which only the timing test
// times.
func newMailHarness(t testing.TB, opts ...func(*Config)) *harness {
	h := newHarness(t, append([]func(*Config){func(c *Config) { c.Mail = true }}, opts...)...)
	h.p.floor = 0
	return h
}

// sentMail is a message of the outbox, opened.
type sentMail struct {
	fsm.Email
	msg email.Message
}

// outbox is every message committed so far, oldest first.
func (h *harness) outbox() []sentMail {
	h.t.Helper()
	es, _, err := h.applier.State().Emails(fsm.Page{Page: 1, PageSize: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []sentMail
	for _, e := range es {
		m, err := email.Open(nil, e)
		if err != nil {
			h.t.Fatalf("open %s: %v", e.ID, err)
		}
		out = append(out, sentMail{Email: e, msg: m})
	}
	return out
}

// mailsTo are the messages to address to.
func (h *harness) mailsTo(to string) []sentMail {
	var out []sentMail
	for _, m := range h.outbox() {
		if strings.EqualFold(m.To, to) {
			out = append(out, m)
		}
	}
	return out
}

// lastLink is the path of the link in the newest message to to, checking
// its kind.
func (h *harness) lastLink(to, kind string) string {
	h.t.Helper()
	ms := h.mailsTo(to)
	if len(ms) == 0 {
		var all []string
		for _, m := range h.outbox() {
			all = append(all, m.Kind+" to "+m.To)
		}
		h.t.Fatalf("no message to %s; outbox: %q", to, all)
	}
	m := ms[len(ms)-1]
	if m.Kind != kind || m.msg.Link == "" {
		h.t.Fatalf("newest message to %s: kind %s, link %q; want a %s link", to, m.Kind, m.msg.Link, kind)
	}
	if !strings.Contains(m.msg.Text, m.msg.Link) {
		h.t.Errorf("the text does not carry the link:\n%s", m.msg.Text)
	}
	path, ok := strings.CutPrefix(m.msg.Link, h.srv.URL)
	if !ok {
		h.t.Fatalf("link %q is not under the issuer %s", m.msg.Link, h.srv.URL)
	}
	return path
}

// tokenOf is the token at the end of a link's path.
func tokenOf(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// onlyPostForm is the one post form of p but the language picker's.
func onlyPostForm(t testing.TB, p page) htmlForm {
	t.Helper()
	var out []htmlForm
	for _, f := range parseForms(t, p.body) {
		if f.method == "post" && !slices.Contains(f.buttons, [2]string{"method", methodLanguage}) {
			out = append(out, f)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want one post form, got %d (status %d):\n%s", len(out), p.status, p.body)
	}
	return out[0]
}

// fill posts f with its hidden inputs and fields.
func (b *browser) fill(f htmlForm, fields map[string]string) page {
	b.t.Helper()
	v := url.Values{}
	for k, vs := range f.hidden {
		v[k] = slices.Clone(vs)
	}
	for k, val := range fields {
		v.Set(k, val)
	}
	return b.post(f.action, v)
}

// hrefs are the links of p whose text is text.
func hrefs(t testing.TB, p page, text string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(p.body))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" && n.FirstChild != nil && strings.TrimSpace(n.FirstChild.Data) == text {
			out = append(out, htmlform.Attr(n, "href"))
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// oneHref is the one link of p with text.
func oneHref(t testing.TB, p page, text string) string {
	t.Helper()
	hs := hrefs(t, p, text)
	if len(hs) != 1 {
		t.Fatalf("links %q: got %q (status %d):\n%s", text, hs, p.status, p.body)
	}
	return hs[0]
}

// wantPage fails unless p has status and contains every text.
func wantPage(t testing.TB, what string, p page, status int, texts ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("%s: status %d, want %d:\n%s", what, p.status, status, p.body)
	}
	for _, s := range texts {
		if !strings.Contains(p.body, s) && !strings.Contains(p.body, htmlEscape(s)) {
			t.Fatalf("%s: page lacks %q:\n%s", what, s, p.body)
		}
	}
}

// wantInvalidLink fails unless p is the invalid-link page.
func wantInvalidLink(t testing.TB, what string, p page) {
	t.Helper()
	wantPage(t, what, p, http.StatusGone, en(keyLinkInvalidTitle))
	if p.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("%s: Referrer-Policy %q", what, p.header.Get("Referrer-Policy"))
	}
}

// forgot asks for a reset link for address from b's own forgotten-password
// page and returns the answer.
func (b *browser) forgot(address string) page {
	b.t.Helper()
	p := b.get(PathForgot)
	wantPage(b.t, "forgot page", p, http.StatusOK, "Forgot your password?")
	return b.fill(onlyPostForm(b.t, p), map[string]string{"email": address})
}

// auditTrail is every event recorded, as the JSON an operator reads.
func (h *harness) auditTrail() string {
	h.t.Helper()
	evs, err := h.applier.State().AuditEvents(fsm.AuditQuery{Limit: fsm.MaxAuditPage})
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := json.Marshal(evs)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// events are the events of type typ.
func (h *harness) events(typ string) []fsm.Event {
	h.t.Helper()
	evs, err := h.applier.State().AuditEvents(fsm.AuditQuery{Type: typ, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

// wantNoToken fails when a token, or its stored hash, is anywhere in the
// audit trail.
func (h *harness) wantNoToken(tokens ...string) {
	h.t.Helper()
	trail := h.auditTrail()
	for _, tok := range tokens {
		if strings.Contains(trail, tok) || strings.Contains(trail, email.HashToken(tok)) {
			h.t.Errorf("token %s… (or its hash) is in the audit trail", tok[:6])
		}
	}
}

// TestSelfServiceOffWithoutMail: with Mail false none of the pages exist
// and no page links to them.
func TestSelfServiceOffWithoutMail(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	for _, tc := range []struct{ method, path string }{
		{"GET", PathForgot}, {"POST", PathForgot},
		{"GET", PathReset + "/" + strings.Repeat("a", 43)}, {"POST", PathReset},
		{"GET", PathVerify + "/" + strings.Repeat("a", 43)}, {"POST", PathVerify},
		{"GET", PathRegister}, {"GET", PathRegister + "/" + strings.Repeat("a", 43)}, {"POST", PathRegister},
		{"GET", PathInvite + "/" + strings.Repeat("a", 43)}, {"POST", PathInvite},
	} {
		var p page
		if tc.method == "GET" {
			p = b.get(tc.path)
		} else {
			p = b.post(tc.path, url.Values{"email": {hEmail}})
		}
		if p.status != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", tc.method, tc.path, p.status)
		}
	}
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: hOrgA, Registration: &fsm.Registration{Enabled: true, EmailDomains: []string{"example.com"}}})
	p := b.get(authzPath(authzQuery(hPublic, false)))
	for _, s := range []string{PathForgot, PathRegister, "Forgot your password?", "Create an account"} {
		if strings.Contains(p.body, s) {
			t.Errorf("sign-in page without mail has %q", s)
		}
	}
	home := b.accountSignIn(hEmail, hPassword)
	if strings.Contains(home.body, "email-change") || strings.Contains(home.body, "new_email") {
		t.Error("/account without mail offers a new address")
	}
	// Posted anyway, the action is refused and nothing is sent.
	got := b.fill(formWith(t, home, "action", "password-change"), map[string]string{"action": "email-change", "new_email": "ann.new@example.com"})
	wantPage(t, "email-change without mail", got, http.StatusBadRequest)
	if out := h.outbox(); len(out) != 0 {
		t.Errorf("outbox: %+v", out)
	}
}

// TestSignInPageLinks: with mail on, the first sign-in page links to the
// forgotten-password page, carrying the request so that the page leads
// back to it; the account's sign-in links there too.
func TestSignInPageLinks(t *testing.T) {
	h := newMailHarness(t)
	b := h.browser()
	p := b.get(authzPath(authzQuery(hPublic, false)))
	forgot := oneHref(t, p, "Forgot your password?")
	if !strings.HasPrefix(forgot, PathForgot+"?r=") {
		t.Fatalf("forgot link %q", forgot)
	}
	if hs := hrefs(t, p, "Create an account"); len(hs) != 0 {
		t.Errorf("registration offered while the organization does not allow it: %q", hs)
	}
	fp := b.get(forgot)
	wantPage(t, "forgot", fp, http.StatusOK, "to continue to <strong>"+hAppName)
	if got, want := oneHref(t, fp, "Back to sign in"), authzPath(authzQuery(hPublic, false)); got != want {
		t.Errorf("back link %q, want %q", got, want)
	}
	if in := parseForms(t, fp.body)[0].inputs; !slices.Equal(in, []string{"email"}) {
		t.Errorf("forgot inputs %q", in)
	}
	if !strings.Contains(fp.body, `autocomplete="email"`) {
		t.Error("the address input is not autocomplete=email")
	}
	// A tampered context is dropped, not trusted: the page still works.
	wantPage(t, "forgot, tampered context", b.get(PathForgot+"?r=AAAA"), http.StatusOK, "Forgot your password?")
	if hs := hrefs(t, b.get(PathForgot+"?r=AAAA"), "Back to sign in"); len(hs) != 0 {
		t.Errorf("back link from a tampered context: %q", hs)
	}
	if got := oneHref(t, h.browser().get(PathAccount), "Forgot your password?"); got != PathForgot {
		t.Errorf("/account sign-in's forgot link %q", got)
	}
}

// TestForgotAndReset: the whole reset through the pages. The link's page
// carries no token in its form, the new password follows the policy,
// setting it ends every session of the person, and the link works once;
// the audit trail records the request and the reset, without the token.
func TestForgotAndReset(t *testing.T) {
	h := newMailHarness(t)
	elsewhere := h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)

	b := h.browser()
	p := b.forgot(strings.ToUpper(hEmail))
	wantPage(t, "forgot answer", p, http.StatusOK, en(keyCheckEmail), "If an account exists for that address")
	path := h.lastLink(hEmail, fsm.EmailPasswordReset)
	if !strings.HasPrefix(path, PathReset+"/") {
		t.Fatalf("reset link %q", path)
	}
	token := tokenOf(path)
	if m := h.mailsTo(hEmail)[0]; m.UserID != hUser || !strings.Contains(m.msg.Text, "30 minutes") {
		t.Errorf("message: user %q, text %q", m.UserID, m.msg.Text)
	}

	rp := b.get(path)
	wantPage(t, "reset page", rp, http.StatusOK, "Choose a new password", hEmail)
	if rp.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("reset page Referrer-Policy %q", rp.header.Get("Referrer-Policy"))
	}
	f := onlyPostForm(t, rp)
	if f.action != PathReset || strings.Contains(rp.body, token) {
		t.Fatalf("the reset form carries the token (action %q)", f.action)
	}
	if !strings.Contains(rp.body, `autocomplete="new-password"`) {
		t.Error("new password input is not autocomplete=new-password")
	}
	// Nothing is used by looking at the page.
	if _, err := h.applier.State().Link(email.HashToken(token)); err != nil {
		t.Fatalf("the GET used the link: %v", err)
	}

	wantPage(t, "short password", b.fill(f, map[string]string{"new_password": "short"}), http.StatusBadRequest, en(keyPasswordLength))
	const next = "a new and long passphrase"
	done := b.fill(f, map[string]string{"new_password": next})
	wantPage(t, "reset", done, http.StatusOK, en(keyPasswordSetTitle))
	if s, err := h.applier.State().SSOSession(elsewhere.SSO); err != nil || s.EndedAt.IsZero() {
		t.Errorf("a session outlived the reset: %+v %v", s, err)
	}
	if u, _ := h.applier.State().User(hUser); !strings.HasPrefix(u.PasswordHash, "$argon2id$") {
		t.Errorf("hash %q", u.PasswordHash)
	}
	if b.cookie("/", session.SSOCookie) != "" {
		t.Error("the reset signed the browser in")
	}
	wantInvalidLink(t, "the form posted twice", b.fill(f, map[string]string{"new_password": "another passphrase"}))
	wantInvalidLink(t, "the link followed again", b.get(path))
	if got := h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, next); got.User != hUser {
		t.Fatalf("new password: %+v", got)
	}
	ob := h.browser()
	wantPage(t, "old password", ob.signIn(ob.get(authzPath(authzQuery(hPublic, false))), hEmail, hPassword), http.StatusBadRequest)

	var actions []string
	for _, e := range h.events(fsm.EventPasswordReset) {
		actions = append(actions, e.Detail["action"]+"/"+e.Detail["message"]+"/"+e.Subject)
	}
	if want := []string{"requested/link/" + hUser, "completed//" + hUser}; !slices.Equal(actions, want) {
		t.Errorf("password_reset events %q, want %q", actions, want)
	}
	h.wantNoToken(token)
}

// TestResetLinkRefused: a reset link dies when it is used, expires, is
// replaced by a newer one or the password changes; a link of another
// purpose, or something that is not a token, opens nothing. Each shows
// the one invalid-link page and changes nothing.
func TestResetLinkRefused(t *testing.T) {
	h := newMailHarness(t)
	reset := func() string {
		t.Helper()
		h.browser().forgot(hEmail)
		return h.lastLink(hEmail, fsm.EmailPasswordReset)
	}
	hashBefore := func() string { u, _ := h.applier.State().User(hUser); return u.PasswordHash }

	t.Run("expired", func(t *testing.T) {
		path := reset()
		b := h.browser()
		f := onlyPostForm(t, b.get(path)) // shown while it works
		h.clock.Add(resetTTL + time.Second)
		wantInvalidLink(t, "expired link", b.get(path))
		before := hashBefore()
		wantInvalidLink(t, "expired link's form", b.fill(f, map[string]string{"new_password": "long enough password"}))
		if hashBefore() != before {
			t.Error("an expired link changed the password")
		}
		h.clock.Add(2 * time.Hour) // past the limits' hour
	})
	t.Run("replaced by a newer one", func(t *testing.T) {
		older := reset()
		newer := reset()
		wantInvalidLink(t, "older link", h.browser().get(older))
		wantPage(t, "newer link", h.browser().get(newer), http.StatusOK, "Choose a new password")
		h.clock.Add(2 * time.Hour)
	})
	t.Run("after a password change", func(t *testing.T) {
		path := reset()
		b := h.browser()
		home := b.accountSignIn(hEmail, hPassword)
		wantPage(t, "change", b.submit(formWith(t, home, "action", "password-change"), "action", "password-change",
			map[string]string{"current_password": hPassword, "new_password": hPassword + " 2"}), http.StatusOK, "Your password was changed")
		wantInvalidLink(t, "link after a password change", h.browser().get(path))
		h.apply(fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUser, PasswordHash: ptr(h.hash(hPassword)), At: h.clock.Now()})
		h.clock.Add(2 * time.Hour)
	})
	t.Run("another purpose's token", func(t *testing.T) {
		b := h.browser()
		home := b.accountSignIn(hEmail, hPassword)
		b.submit(formWith(t, home, "action", "email-change"), "action", "email-change", map[string]string{"new_email": "ann.new@example.com"})
		verify := h.lastLink("ann.new@example.com", fsm.EmailVerify)
		wantInvalidLink(t, "verify token on the reset page", b.get(PathReset+"/"+tokenOf(verify)))
		path := reset()
		wantInvalidLink(t, "reset token on the verify page", b.get(PathVerify+"/"+tokenOf(path)))
		wantInvalidLink(t, "reset token on the registration page", b.get(PathRegister+"/"+tokenOf(path)))
		wantInvalidLink(t, "reset token on the invitation page", b.get(PathInvite+"/"+tokenOf(path)))
		wantPage(t, "the verify link still works", b.get(verify), http.StatusOK, "Confirm your email address")
		h.clock.Add(2 * time.Hour)
	})
	t.Run("not a token", func(t *testing.T) {
		b := h.browser()
		for _, tok := range []string{"x", strings.Repeat("A", 42), strings.Repeat("A", 44), strings.Repeat("A", 43), strings.Repeat("=", 43)} {
			wantInvalidLink(t, "token "+tok, b.get(PathReset+"/"+tok))
		}
		// A form without a step, or with one sealed for another page.
		wantPage(t, "post without a step", b.post(PathReset, url.Values{"new_password": {"long enough password"}}), http.StatusBadRequest)
		ff := onlyPostForm(t, b.get(PathForgot))
		ff.action = PathReset
		wantPage(t, "forgot's step posted to the reset", b.fill(ff, map[string]string{"new_password": "long enough password"}), http.StatusBadRequest, en(keyFormExpired))
	})
}

// TestResetKeepsTheSecondFactor: a person with an authenticator app who
// resets their password is still asked for it at the next sign-in; the
// reset earns no mfa and removes no factor.
func TestResetKeepsTheSecondFactor(t *testing.T) {
	h := newMailHarness(t)
	h.enrollTOTP(hUser)
	h.browser().forgot(hEmail)
	b := h.browser()
	f := onlyPostForm(t, b.get(h.lastLink(hEmail, fsm.EmailPasswordReset)))
	const next = "the new password it is"
	wantPage(t, "reset", b.fill(f, map[string]string{"new_password": next}), http.StatusOK, en(keyPasswordSetTitle))
	if fac, err := h.applier.State().Factors(hUser); err != nil || fac.TOTP == nil {
		t.Fatalf("the reset removed the authenticator app: %+v %v", fac, err)
	}
	p := b.signIn(b.get(authzPath(authzQuery(hPublic, true))), hEmail, next)
	wantPage(t, "sign-in after the reset", p, http.StatusOK, `value="otp"`)
	if strings.HasPrefix(p.header.Get("Content-Type"), "application/json") {
		t.Fatal("signed in without the second factor")
	}
	s := h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, next)
	if s.ACR == "urn:service:sso:acr:mfa" || slices.Contains(s.AMR, "otp") {
		t.Errorf("a password sign-in after a reset has %s %v", s.ACR, s.AMR)
	}
}

// TestForgotTellsNothing: the forgotten-password page answers a local
// person with a password, an unknown address, a person without a password
// and a directory person with the same status and the same page; only
// the outbox differs (a link, nothing, nothing, a directory notice).
func TestForgotTellsNothing(t *testing.T) {
	h := newMailHarness(t)
	now := h.clock.Now()
	const nopass, dirPerson = "nopass@example.com", "dee@corp.example"
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: "1c000000-0000-4000-8000-000000000003", Email: nopass, CreatedAt: now}})
	const dirID = "3d000000-0000-4000-8000-000000000001"
	h.apply(fsm.TypePutDirectory, fsm.PutDirectory{Create: true, Directory: fsm.Directory{
		ID: dirID, Name: "Corp LDAP", URL: "ldaps://127.0.0.1:1", BindDN: "cn=x", UserBase: "ou=people", UserFilter: "(mail=%s)",
		IDAttribute: "entryUUID", EmailAttribute: "mail", SyncInterval: time.Hour, CreatedAt: now, UpdatedAt: now}})
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: "1d000000-0000-4000-8000-000000000004", Email: dirPerson,
		DirectoryID: dirID, DirectoryUID: "dee", CreatedAt: now}})

	type answer struct {
		status int
		body   string
	}
	cases := []struct {
		name, address, wantKind string
	}{
		{"local person", hEmail, "link"},
		{"unknown address", "nobody@example.com", ""},
		{"person without a password", nopass, ""},
		{"directory person", dirPerson, "directory"},
	}
	var first *answer
	for _, tc := range cases {
		p := h.browser().forgot(tc.address)
		a := answer{p.status, p.body}
		if first == nil {
			first = &a
		} else if a != *first {
			t.Errorf("%s: answer differs from the first:\n%d %s\nvs\n%d %s", tc.name, a.status, a.body, first.status, first.body)
		}
		ms := h.mailsTo(tc.address)
		switch tc.wantKind {
		case "":
			if len(ms) != 0 {
				t.Errorf("%s: %d messages", tc.name, len(ms))
			}
		case "link":
			if len(ms) != 1 || ms[0].msg.Link == "" {
				t.Errorf("%s: %+v", tc.name, ms)
			}
		case "directory":
			if len(ms) != 1 || ms[0].Kind != fsm.EmailPasswordReset || ms[0].msg.Link != "" || !strings.Contains(ms[0].msg.Text, "Corp LDAP") {
				t.Errorf("%s: %+v", tc.name, ms)
			}
		}
	}
	if strings.Contains(first.body, "csrf") || strings.Contains(first.body, "<form") {
		t.Error("the answer carries a form")
	}
	// The trail names the known people, and nothing of the others.
	var subjects []string
	for _, e := range h.events(fsm.EventPasswordReset) {
		subjects = append(subjects, e.Subject+"/"+e.Detail["message"])
	}
	want := []string{hUser + "/link", "/none", "1c000000-0000-4000-8000-000000000003/none", "1d000000-0000-4000-8000-000000000004/directory"}
	if !slices.Equal(subjects, want) {
		t.Errorf("events %q, want %q", subjects, want)
	}
	if trail := h.auditTrail(); strings.Contains(trail, "nobody@") {
		t.Error("the typed unknown address is in the audit trail")
	}
}

// TestForgotLimits: at most 3 reset messages an address an hour and 20
// requests a client address an hour are committed; past a limit the page
// is the same and nothing is stored or sent. The throttle keys hold no
// address.
func TestForgotLimits(t *testing.T) {
	h := newMailHarness(t)
	var first page
	for i := range 4 {
		p := h.browser().forgot(hEmail)
		if i == 0 {
			first = p
		}
		if p.status != first.status || p.body != first.body {
			t.Fatalf("request %d answers otherwise:\n%s", i+1, p.body)
		}
	}
	if n := len(h.mailsTo(hEmail)); n != 3 {
		t.Errorf("messages to one address in an hour: %d, want 3", n)
	}
	key := throttleMailbox.rule(email.MailboxKey(hEmail)).Key
	if th, err := h.applier.State().Throttle(key); err != nil || !th.Locked(h.clock.Now()) || strings.Contains(key, "@") {
		t.Errorf("throttle %q: %+v %v", key, th, err)
	}
	// A different spelling of the address counts against the same key.
	h.browser().forgot(" ANN@example.COM")
	if n := len(h.mailsTo(hEmail)); n != 3 {
		t.Errorf("after a capitalized request: %d messages", n)
	}
	h.clock.Add(time.Hour + time.Minute)
	h.browser().forgot(hEmail)
	if n := len(h.mailsTo(hEmail)); n != 4 {
		t.Errorf("an hour later: %d messages, want 4", n)
	}

	// 21 requests from one client address, each for another person: the
	// 21st is not committed.
	h.clock.Add(2 * time.Hour)
	now := h.clock.Now()
	hash := h.hash(hPassword)
	var addrs []string
	for i := range 21 {
		a := fmt.Sprintf("person%02d@example.com", i)
		h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: fmt.Sprintf("1e000000-0000-4000-8000-%012d", i), Email: a, PasswordHash: hash, CreatedAt: now}})
		addrs = append(addrs, a)
	}
	for i, a := range addrs {
		p := h.browser().forgot(a)
		if p.status != http.StatusOK || p.body != first.body {
			t.Fatalf("request %d answers otherwise: %d", i+1, p.status)
		}
	}
	sent := 0
	for _, a := range addrs {
		sent += len(h.mailsTo(a))
	}
	if sent != 20 {
		t.Errorf("messages from one client address in an hour: %d, want 20", sent)
	}
	if n := len(h.mailsTo(addrs[20])); n != 0 {
		t.Errorf("the 21st address got %d messages", n)
	}
}

// TestHeaderInjection: an address with a line break never reaches a
// message: the forgotten-password page, the registration page and
// /account refuse it as they would any malformed address, and the outbox
// stays empty.
func TestHeaderInjection(t *testing.T) {
	h := newMailHarness(t)
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: hOrgA, Registration: &fsm.Registration{Enabled: true, EmailDomains: []string{"example.com"}}})
	for _, evil := range []string{
		hEmail + "\r\nBcc: evil@evil.example",
		hEmail + "\nBcc: evil@evil.example",
		hEmail + "\rBcc: evil@evil.example",
		"new@example.com\r\nSubject: hi",
	} {
		wantPage(t, "forgot", h.browser().forgot(evil), http.StatusBadRequest, en(keyBadAddress))

		b := h.browser()
		reg := b.get(oneHref(t, b.get(authzPath(authzQuery(hPublic, false))), "Create an account"))
		wantPage(t, "register", b.fill(onlyPostForm(t, reg), map[string]string{"email": evil}), http.StatusBadRequest, en(keyBadAddress))

		home := b.accountSignIn(hEmail, hPassword)
		wantPage(t, "account", b.submit(formWith(t, home, "action", "email-change"), "action", "email-change", map[string]string{"new_email": evil}),
			http.StatusBadRequest, en(keyBadAddress))
	}
	if out := h.outbox(); len(out) != 0 {
		t.Errorf("outbox: %+v", out)
	}
}
