package signin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/webui"
)

// TestAddressChange: /account asks for a new address after a recent
// sign-in; a verify_email link goes to the new address while the old one
// stays; the link's GET changes nothing, its POST makes the new address
// the person's, verified, and tells the old one (email_changed); the
// link works once.
func TestAddressChange(t *testing.T) {
	h := newMailHarness(t)
	const newAddr = "ann.new@example.com"
	b := h.browser()
	home := b.accountSignIn(hEmail, hPassword)
	if !strings.Contains(home.body, `autocomplete="email"`) || !strings.Contains(home.body, "(confirmed)") {
		t.Fatalf("no address section:\n%s", home.body)
	}
	p := b.submit(formWith(t, home, "action", "email-change"), "action", "email-change", map[string]string{"new_email": " Ann.New@Example.com "})
	wantPage(t, "change", p, http.StatusOK, "Pending: we sent a link to "+newAddr, "until then it stays "+hEmail)
	if u, _ := h.applier.State().User(hUser); u.Email != hEmail || !u.EmailVerified {
		t.Fatalf("the address changed before the link was followed: %+v", u)
	}
	path := h.lastLink(newAddr, fsm.EmailVerify)
	if !strings.HasPrefix(path, PathVerify+"/") {
		t.Fatalf("verify link %q", path)
	}
	if evs := h.events(fsm.EventVerifyEmail); len(evs) != 1 || evs[0].Detail["action"] != "requested" || evs[0].Subject != hUser {
		t.Errorf("events %+v", evs)
	}

	other := h.browser() // the link may be opened anywhere
	cp := other.get(path)
	wantPage(t, "confirm page", cp, http.StatusOK, "Confirm your email address", newAddr, "signs in as "+hEmail)
	if cp.header.Get("Referrer-Policy") != "no-referrer" || strings.Contains(cp.body, tokenOf(path)) {
		t.Error("the confirm page leaks its token")
	}
	if u, _ := h.applier.State().User(hUser); u.Email != hEmail {
		t.Fatal("the GET changed the address")
	}
	done := other.fill(onlyPostForm(t, cp), nil)
	wantPage(t, "confirmed", done, http.StatusOK, en(keyEmailVerifiedTitle), newAddr)
	if u, _ := h.applier.State().User(hUser); u.Email != newAddr || !u.EmailVerified {
		t.Fatalf("after the link: %+v", u)
	}
	old := h.mailsTo(hEmail)
	if len(old) != 1 || old[0].Kind != fsm.EmailChanged || !strings.Contains(old[0].msg.Text, newAddr) {
		t.Errorf("message to the old address: %+v", old)
	}
	wantInvalidLink(t, "the link followed twice", other.fill(onlyPostForm(t, cp), nil))
	wantInvalidLink(t, "the link opened again", other.get(path))
	h.wantNoToken(tokenOf(path))
	if got := h.browser().fullSignInWith(authzQuery(hPublic, false), newAddr, hPassword); got.User != hUser {
		t.Errorf("sign-in with the new address: %+v", got)
	}
}

// TestAddressChangeRules: an address change needs the gate of any change
// (a sign-in in the last 15 minutes), gives no sign of another account's
// address, confirms an unconfirmed address typed again, and is limited
// to 5 an hour per person.
func TestAddressChangeRules(t *testing.T) {
	h := newMailHarness(t)
	b := h.browser()
	home := b.accountSignIn(hEmail, hPassword)
	change := func(addr string) page {
		t.Helper()
		return b.submit(formWith(t, home, "action", "email-change"), "action", "email-change", map[string]string{"new_email": addr})
	}
	wantPage(t, "same address", change(hEmail), http.StatusBadRequest, en(keyEmailSame))
	wantPage(t, "bad address", change("ann@example.com."), http.StatusBadRequest, en(keyBadAddress))

	// Bob's address: the same notice, nothing sent, nothing stored.
	p := change(hEmailB)
	wantPage(t, "taken address", p, http.StatusOK, "Pending: we sent a link to "+hEmailB)
	if n := len(h.mailsTo(hEmailB)); n != 0 {
		t.Errorf("a message went to another account's address: %d", n)
	}

	for i := range 3 {
		wantPage(t, "change", change("ann"+string(rune('a'+i))+"@example.com"), http.StatusOK, "Pending")
	}
	wantPage(t, "limit", change("ann.limit@example.com"), http.StatusOK, "Pending") // the 5th
	wantPage(t, "over the limit", change("ann.over@example.com"), http.StatusTooManyRequests, en(keyEmailLimit))
	if n := len(h.mailsTo("ann.over@example.com")); n != 0 {
		t.Errorf("the 6th change was sent")
	}
	// Only the newest link works.
	wantInvalidLink(t, "an older link", h.browser().get(h.lastLink("anna@example.com", fsm.EmailVerify)))
	wantPage(t, "the newest link", h.browser().get(h.lastLink("ann.limit@example.com", fsm.EmailVerify)), http.StatusOK, "Confirm")

	// Bob's own address is not verified: typed again, it is confirmed.
	h.clock.Add(2 * time.Hour)
	bb := h.browser()
	bh := bb.accountSignIn(hEmailB, hPassword)
	if !strings.Contains(bh.body, "not confirmed yet") {
		t.Error("an unverified address is not shown so")
	}
	wantPage(t, "confirm own", bb.submit(formWith(t, bh, "action", "email-change"), "action", "email-change", map[string]string{"new_email": hEmailB}),
		http.StatusOK, "to confirm the address")
	cp := bb.get(h.lastLink(hEmailB, fsm.EmailVerify))
	wantPage(t, "confirm page", cp, http.StatusOK, "Confirm that "+hEmailB+" is your address.")
	bb.fill(onlyPostForm(t, cp), nil)
	if u, _ := h.applier.State().User(hUserB); !u.EmailVerified || u.Email != hEmailB {
		t.Errorf("bob: %+v", u)
	}
	if ms := h.mailsTo(hEmailB); len(ms) != 1 {
		t.Errorf("confirming one's own address sends no email_changed: %+v", ms)
	}

	// Like a password change, it needs the second factor the person has,
	// verified afresh.
	secret := h.enrollTOTP(hUserB)
	bh = bb.get(PathAccount)
	p = bb.submit(formWith(t, bh, "action", "email-change"), "action", "email-change", map[string]string{"new_email": "bob.new@example.com"})
	wantPage(t, "second factor first", p, http.StatusOK, `value="otp"`)
	if n := len(h.mailsTo("bob.new@example.com")); n != 0 {
		t.Fatal("changed without the second factor")
	}
	code, err := factor.TOTPCode(secret, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	bh = bb.submit(formWith(t, p, "method", "otp"), "method", "otp", map[string]string{"code": code})
	p = bb.submit(formWith(t, bh, "action", "email-change"), "action", "email-change", map[string]string{"new_email": "bob.new@example.com"})
	wantPage(t, "after the second factor", p, http.StatusOK, "Pending: we sent a link to bob.new@example.com")
}

// TestAddressTakenMeanwhile: when another account took the address
// between the request and the link, the link's POST says so and changes
// nothing.
func TestAddressTakenMeanwhile(t *testing.T) {
	h := newMailHarness(t)
	const target = "shared@example.com"
	b := h.browser()
	home := b.accountSignIn(hEmail, hPassword)
	b.submit(formWith(t, home, "action", "email-change"), "action", "email-change", map[string]string{"new_email": target})
	cp := b.get(h.lastLink(target, fsm.EmailVerify))
	h.apply(fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUserB, Email: ptr(target), At: h.clock.Now()})
	wantPage(t, "taken", b.fill(onlyPostForm(t, cp), nil), http.StatusConflict, en(keyEmailTakenTitle))
	if u, _ := h.applier.State().User(hUser); u.Email != hEmail {
		t.Errorf("ann: %+v", u)
	}
}

// openRegistration lets org alpha's people register with addresses at
// domains.
func (h *harness) openRegistration(domains ...string) {
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: hOrgA, Registration: &fsm.Registration{Enabled: true, EmailDomains: domains}})
}

// registerPage follows the sign-in page's registration link of q.
func (b *browser) registerPage(q url.Values) page {
	b.t.Helper()
	p := b.get(b.h.registerLink(b, q))
	wantPage(b.t, "register page", p, http.StatusOK, "Create an account")
	return p
}

func (h *harness) registerLink(b *browser, q url.Values) string {
	h.t.Helper()
	return oneHref(h.t, b.get(authzPath(q)), "Create an account")
}

// TestRegistration: from an application's sign-in page to its code. The
// registration page takes an address in the organization's domains; its
// link asks for a password, creates the person verified with an active
// membership, signs them in and goes on with the request.
func TestRegistration(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("allowed.example", "example.com")
	b := h.browser()
	q := authzQuery(hPublic, false)
	rp := b.registerPage(q)
	if got, want := oneHref(t, rp, "Back to sign in"), authzPath(q); got != want {
		t.Errorf("back link %q, want %q", got, want)
	}
	p := b.fill(onlyPostForm(t, rp), map[string]string{"email": "New.Person@Allowed.Example"})
	const addr = "new.person@allowed.example"
	wantPage(t, "registration sent", p, http.StatusOK, en(keyCheckEmail), addr)
	path := h.lastLink(addr, fsm.EmailRegistration)
	if !strings.HasPrefix(path, PathRegister+"/") {
		t.Fatalf("registration link %q", path)
	}
	if l, err := h.applier.State().Link(email.HashToken(tokenOf(path))); err != nil || l.OrgID != hOrgA || l.Continue == "" {
		t.Fatalf("link %+v %v", l, err)
	}

	lp := b.get(path)
	wantPage(t, "registration link", lp, http.StatusOK, "Create your account", addr, `autocomplete="new-password"`)
	if lp.header.Get("Referrer-Policy") != "no-referrer" || strings.Contains(lp.body, tokenOf(path)) {
		t.Error("the registration page leaks its token")
	}
	f := onlyPostForm(t, lp)
	wantPage(t, "short password", b.fill(f, map[string]string{"new_password": "short"}), http.StatusBadRequest, en(keyPasswordLength))
	const pw = "my very own passphrase"
	p = b.fill(f, map[string]string{"new_password": pw})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != authzPath(q) {
		t.Fatalf("after registering: %d %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	s := done(t, b.get(p.header.Get("Location")))
	u, err := h.applier.State().UserByEmail(addr)
	if err != nil || s.User != u.ID || !u.EmailVerified || u.PasswordHash == "" || s.ACR != authn.ACRPwd {
		t.Fatalf("signed in %+v as %+v (%v)", s, u, err)
	}
	if m, err := h.applier.State().MembershipOf(u.ID, hOrgA); err != nil || m.Status != fsm.MembershipActive {
		t.Errorf("membership %+v %v", m, err)
	}
	wantInvalidLink(t, "the link used twice", h.browser().get(path))
	// The sign-in rotated the CSRF token: the old form is refused before
	// its link is looked at; from a fresh page, the link is gone.
	wantPage(t, "the form posted twice", b.fill(f, map[string]string{"new_password": pw}), http.StatusForbidden)
	var actions []string
	for _, e := range h.events(fsm.EventRegistration) {
		actions = append(actions, e.Detail["action"]+"/"+e.Subject+"/"+e.OrgID)
	}
	if want := []string{"requested//" + hOrgA, "completed/" + u.ID + "/" + hOrgA}; strings.Join(actions, " ") != strings.Join(want, " ") {
		t.Errorf("registration events %q, want %q", actions, want)
	}
	h.wantNoToken(tokenOf(path))
	if got := h.browser().fullSignInWith(q, addr, pw); got.User != u.ID {
		t.Errorf("signing in again: %+v", got)
	}
}

// TestRegistrationDomains: an address outside the organization's domains,
// however it is dressed up, is refused with a clear message and nothing
// is sent; an address that has an account gets a pointer to the reset,
// and the page says the same as for a new one.
func TestRegistrationDomains(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("allowed.example", "example.com")
	b := h.browser()
	rp := b.registerPage(authzQuery(hPublic, false))
	for _, tc := range []struct{ address, want string }{
		{"user@evil.example", "Use your address at allowed.example, example.com."},
		{"user@allowed.example@evil.example", en(keyBadAddress)},
		{`"user@allowed.example"@evil.example`, en(keyBadAddress)},
		{"user@allowed.example.", en(keyBadAddress)},
		{"user@\u0430llowed.example", "Use your address at allowed.example"}, // a Cyrillic а
		{"user@allowed.example.evil.example", "Use your address at allowed.example"},
		{"user@sub.allowed.example", "Use your address at allowed.example"},
		{"User <user@allowed.example>", en(keyBadAddress)},
		{"\u0430nn@allowed.example", en(keyAddressLocal)},
	} {
		p := b.fill(onlyPostForm(t, rp), map[string]string{"email": tc.address})
		wantPage(t, tc.address, p, http.StatusBadRequest, htmlEscape(tc.want))
	}
	if out := h.outbox(); len(out) != 0 {
		t.Fatalf("outbox after refusals: %+v", out)
	}

	// Upper case and full-width letters name the same domain.
	p := b.fill(onlyPostForm(t, rp), map[string]string{"email": "USER@ALLOWED.EXAMPLE"})
	wantPage(t, "upper case", p, http.StatusOK, en(keyCheckEmail), "user@allowed.example")

	// Known and unknown addresses: the same page, one message each.
	known := b.fill(onlyPostForm(t, rp), map[string]string{"email": hEmail})
	unknown := b.fill(onlyPostForm(t, rp), map[string]string{"email": "zzz@example.com"})
	if known.status != unknown.status || strings.ReplaceAll(known.body, hEmail, "X") != strings.ReplaceAll(unknown.body, "zzz@example.com", "X") {
		t.Errorf("pages differ:\n%s\nvs\n%s", known.body, unknown.body)
	}
	ms := h.mailsTo(hEmail)
	if len(ms) != 1 || ms[0].Kind != fsm.EmailRegistration || ms[0].msg.Link != "" || !strings.Contains(ms[0].msg.Text, h.srv.URL+PathForgot) {
		t.Errorf("message to an existing account: %+v", ms)
	}
	if strings.Contains(ms[0].msg.Text, PathRegister+"/") {
		t.Error("an existing account got a registration link")
	}
	h.lastLink("zzz@example.com", fsm.EmailRegistration)

	// 3 an hour per address, silently.
	for range 3 {
		wantPage(t, "again", b.fill(onlyPostForm(t, rp), map[string]string{"email": "zzz@example.com"}), http.StatusOK, en(keyCheckEmail))
	}
	if n := len(h.mailsTo("zzz@example.com")); n != 3 {
		t.Errorf("registration messages to one address: %d, want 3", n)
	}
}

// htmlEscape is s as html/template writes it in text.
func htmlEscape(s string) string {
	return strings.NewReplacer("'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace(s)
}

// TestRegistrationOffered: the sign-in page offers registration only when
// the organization of the sign-in allows it: the client's own, or for a
// multi-organization client the organization_hint's when the client
// serves it. The registration page needs the sign-in's context, and a
// registration closed meanwhile creates nobody.
func TestRegistrationOffered(t *testing.T) {
	h := newMailHarness(t)
	now := h.clock.Now()
	const orgB, multi = "0b000000-0000-4000-8000-000000000002", "multi-app"
	h.apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: orgB, Slug: "beta", Name: "Org beta", CreatedAt: now})
	h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
		ID: multi, Name: "Multi", Type: fsm.ClientPublic, Scopes: []string{"openid"}, OrganizationID: hOrgA, MultiOrganization: true, Organizations: []string{hOrgA},
		SkipConsent: true, RedirectURIs: []string{"https://multi.example/cb"}, AccessTokenTTL: 600, CreatedAt: now, UpdatedAt: now,
	}})
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: orgB, Registration: &fsm.Registration{Enabled: true, EmailDomains: []string{"example.com"}}})
	b := h.browser()
	offered := func(q url.Values) bool { return len(hrefs(t, b.get(authzPath(q)), "Create an account")) == 1 }
	hinted := func(org string) url.Values { q := authzQuery(multi, false); q.Set("organization_hint", org); return q }

	if offered(authzQuery(hPublic, false)) || offered(authzQuery(multi, false)) || offered(hinted(hOrgA)) {
		t.Error("registration offered while org alpha does not allow it")
	}
	if offered(hinted(orgB)) {
		t.Error("registration offered into an organization the client does not serve")
	}
	h.openRegistration("example.com")
	if !offered(authzQuery(hPublic, false)) || !offered(hinted(hOrgA)) {
		t.Error("registration not offered")
	}
	if offered(authzQuery(multi, false)) {
		t.Error("registration offered for a multi-organization client without a hint")
	}

	// Through the hinted multi-organization client, and back to it.
	q := hinted(hOrgA)
	regURL := h.registerLink(b, q)
	rp := b.registerPage(q)
	b.fill(onlyPostForm(t, rp), map[string]string{"email": "multi.person@example.com"})
	lp := b.get(h.lastLink("multi.person@example.com", fsm.EmailRegistration))
	p := b.fill(onlyPostForm(t, lp), map[string]string{"new_password": "long enough passphrase"})
	if loc := p.header.Get("Location"); p.status != http.StatusSeeOther || loc != authzPath(q) {
		t.Fatalf("after registering: %d %q", p.status, loc)
	}

	// Without a context: a clear page. Closed meanwhile: nobody created.
	wantPage(t, "no context", b.get(PathRegister), http.StatusBadRequest, en(keyRegisterStart))
	b.fill(onlyPostForm(t, b.get(regURL)), map[string]string{"email": "late@example.com"})
	lp = b.get(h.lastLink("late@example.com", fsm.EmailRegistration))
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: hOrgA, Registration: &fsm.Registration{Enabled: false, EmailDomains: []string{"example.com"}}})
	wantPage(t, "closed meanwhile", b.fill(onlyPostForm(t, lp), map[string]string{"new_password": "long enough passphrase"}), http.StatusForbidden, en(keyRegisterOffTitle))
	if _, err := h.applier.State().UserByEmail("late@example.com"); err == nil {
		t.Error("a person was created after registration closed")
	}
	wantPage(t, "register page, closed", b.get(regURL), http.StatusForbidden, en(keyRegisterOffTitle))
	if offered(q) {
		t.Error("registration still offered")
	}
}

// invite creates an invitation of org alpha for address and returns its
// link's path, as the admin API does.
func (h *harness) invite(address string, ttl time.Duration) (path, id string) {
	h.t.Helper()
	token, hash, err := email.NewToken()
	if err != nil {
		h.t.Fatal(err)
	}
	now := h.clock.Now()
	msg, err := email.Compose(email.Invitation, "en", email.Data{Site: "test", Link: h.srv.URL + PathInvite + "/" + token, OrgName: "Org alpha", Expires: ttl})
	if err != nil {
		h.t.Fatal(err)
	}
	out, err := email.Outgoing(nil, address, fsm.EmailInvitation, "en", "", msg)
	if err != nil {
		h.t.Fatal(err)
	}
	id = "9a000000-0000-4000-8000-" + hash[:12]
	h.apply(fsm.TypeCreateInvitation, fsm.CreateInvitation{Invitation: fsm.Invitation{ID: id, Email: address, OrgID: hOrgA, LinkHash: hash,
		CreatedAt: now, ExpiresAt: now.Add(ttl)}, Email: out, At: now})
	return PathInvite + "/" + token, id
}

// TestInvitationNewPerson: an invited address without an account chooses
// a password and exists, verified, with an active membership; the link
// works once.
func TestInvitationNewPerson(t *testing.T) {
	h := newMailHarness(t)
	const addr = "invited@example.com"
	path, _ := h.invite(addr, 7*24*time.Hour)
	b := h.browser()
	p := b.get(path)
	wantPage(t, "invitation", p, http.StatusOK, "Join Org alpha", addr, `autocomplete="new-password"`)
	if p.header.Get("Referrer-Policy") != "no-referrer" || strings.Contains(p.body, tokenOf(path)) {
		t.Error("the invitation page leaks its token")
	}
	f := onlyPostForm(t, p)
	if f.action != PathInvite {
		t.Errorf("form action %q", f.action)
	}
	wantPage(t, "short", b.fill(f, map[string]string{"new_password": "short"}), http.StatusBadRequest, en(keyPasswordLength))
	const pw = "invited person's passphrase"
	wantPage(t, "created", b.fill(f, map[string]string{"new_password": pw}), http.StatusOK, en(keyAccountMadeTitle), "Org alpha")
	u, err := h.applier.State().UserByEmail(addr)
	if err != nil || !u.EmailVerified {
		t.Fatalf("%+v %v", u, err)
	}
	if m, err := h.applier.State().MembershipOf(u.ID, hOrgA); err != nil || m.Status != fsm.MembershipActive {
		t.Errorf("membership %+v %v", m, err)
	}
	wantInvalidLink(t, "used twice", h.browser().get(path))
	wantInvalidLink(t, "posted twice", b.fill(f, map[string]string{"new_password": pw}))
	if got := h.browser().fullSignInWith(authzQuery(hPublic, false), addr, pw); got.User != u.ID {
		t.Errorf("sign-in: %+v", got)
	}
	evs := h.events(fsm.EventInvitation)
	if len(evs) != 1 || evs[0].Subject != u.ID || evs[0].OrgID != hOrgA || evs[0].Detail["action"] != "accepted" {
		t.Errorf("events %+v", evs)
	}
	h.wantNoToken(tokenOf(path))
}

// TestInvitationExistingPerson: a person with an account signs in on the
// invitation's page (with their second factor when they have one) and
// accepts; their password stays. Signed in as someone else, they are
// asked to sign in with the invited address.
func TestInvitationExistingPerson(t *testing.T) {
	h := newMailHarness(t)
	before, _ := h.applier.State().User(hUserB)
	path, _ := h.invite(hEmailB, time.Hour)

	// Ann's browser: the page asks for Bob's sign-in, and refuses Ann's.
	ann := h.browser()
	ann.fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)
	p := ann.get(path)
	wantPage(t, "signed in as another", p, http.StatusOK, "Sign in to accept the invitation", "This invitation is for "+hEmailB)
	p = ann.signIn(p, hEmail, hPassword)
	wantPage(t, "ann signs in", p, http.StatusBadRequest, "This invitation is for "+hEmailB)
	if _, err := h.applier.State().MembershipOf(hUser, hOrgA); err == nil {
		t.Fatal("ann joined with bob's invitation")
	}

	b := h.browser()
	p = b.get(path)
	if got := parseForms(t, p.body)[0]; got.action != PathInvite {
		t.Errorf("sign-in form action %q", got.action)
	}
	wantPage(t, "wrong password", b.signIn(p, hEmailB, "wrong"), http.StatusBadRequest, "Incorrect email or password.")
	p = b.signIn(b.get(path), hEmailB, hPassword)
	wantPage(t, "accept page", p, http.StatusOK, "Join Org alpha", "Accept the invitation")
	wantPage(t, "accepted", b.fill(onlyPostForm(t, p), nil), http.StatusOK, "You joined Org alpha")
	if m, err := h.applier.State().MembershipOf(hUserB, hOrgA); err != nil || m.Status != fsm.MembershipActive {
		t.Errorf("membership %+v %v", m, err)
	}
	if after, _ := h.applier.State().User(hUserB); after.PasswordHash != before.PasswordHash {
		t.Error("accepting changed the password")
	}
	wantInvalidLink(t, "used", b.get(path))
}

// TestInvitationSecondFactor: a person with an authenticator app must
// give a code before accepting.
func TestInvitationSecondFactor(t *testing.T) {
	h := newMailHarness(t)
	secret := h.enrollTOTP(hUserB)
	path, _ := h.invite(hEmailB, time.Hour)
	b := h.browser()
	p := b.signIn(b.get(path), hEmailB, hPassword)
	wantPage(t, "second factor", p, http.StatusOK, `value="otp"`)
	if strings.Contains(p.body, "Accept the invitation") {
		t.Fatal("the accept button before the second factor")
	}
	code, err := factor.TOTPCode(secret, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	p = b.submit(formWith(t, p, "method", "otp"), "method", "otp", map[string]string{"code": code})
	wantPage(t, "after the code", p, http.StatusOK, "Accept the invitation")
	wantPage(t, "accepted", b.fill(onlyPostForm(t, p), nil), http.StatusOK, "You joined Org alpha")
	if _, err := h.applier.State().MembershipOf(hUserB, hOrgA); err != nil {
		t.Error(err)
	}
}

// TestInvitationRefused: a withdrawn or expired invitation shows the
// invalid-link page and changes nothing; an accept posted by someone whose
// address is not the invited one is refused by the state machine.
func TestInvitationRefused(t *testing.T) {
	h := newMailHarness(t)
	path, id := h.invite("gone@example.com", time.Hour)
	b := h.browser()
	form := onlyPostForm(t, b.get(path))
	h.apply(fsm.TypeDeleteInvitation, fsm.DeleteInvitation{ID: id})
	wantInvalidLink(t, "withdrawn", b.get(path))
	wantInvalidLink(t, "withdrawn, posted", b.fill(form, map[string]string{"new_password": "long enough passphrase"}))
	// A form posted from another browser fails its CSRF check.
	other := h.browser()
	other.get(PathForgot)
	wantPage(t, "another browser's form", other.fill(form, map[string]string{"new_password": "long enough passphrase"}), http.StatusForbidden)

	path, _ = h.invite("late@example.com", 10*time.Minute)
	b = h.browser()
	f := onlyPostForm(t, b.get(path))
	h.clock.Add(10 * time.Minute)
	wantInvalidLink(t, "expired", b.get(path))
	wantInvalidLink(t, "expired, posted", b.fill(f, map[string]string{"new_password": "long enough passphrase"}))
	for _, a := range []string{"gone@example.com", "late@example.com"} {
		if _, err := h.applier.State().UserByEmail(a); err == nil {
			t.Errorf("%s was created", a)
		}
	}

	// The state machine's own check: a UseLink naming a person whose
	// address is not the invited one is refused.
	path, _ = h.invite(hEmailB, time.Hour)
	res, err := h.applier.Apply(context.Background(), fsm.MustCommand(fsm.TypeUseLink, fsm.UseLink{
		Hash: email.HashToken(tokenOf(path)), Purpose: fsm.LinkInvitation, At: h.clock.Now(), UserID: hUser, Membership: "m1"}))
	if err != nil || res.Err != fsm.ErrMismatch {
		t.Errorf("accept as another person: %v %v", err, res.Err)
	}
}

// TestLongRequestContext: the longest request a sign-in page carries to
// the registration page still opens there and in the form's step after
// it; a longer one is dropped, and registration works without the way
// back.
func TestLongRequestContext(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("example.com")
	for _, tc := range []struct {
		n    int
		back bool
	}{{maxResume, true}, {maxResume + 1, false}} {
		resume := "client_id=" + hPublic + "&state=" + strings.Repeat("s", tc.n-len("client_id="+hPublic+"&state="))
		var page webui.SignInPage
		h.p.selfServiceLinks(&page, &authn.Step{ClientID: hPublic, Resume: resume}, h.clock.Now())
		b := h.browser()
		rp := b.get(page.RegisterURL)
		wantPage(t, "register page", rp, http.StatusOK, "Create an account")
		if got := len(hrefs(t, rp, "Back to sign in")) == 1; got != tc.back {
			t.Errorf("resume of %d: back link %v, want %v", tc.n, got, tc.back)
		}
		addr := fmt.Sprintf("long%d@example.com", tc.n)
		wantPage(t, "registration", b.fill(onlyPostForm(t, rp), map[string]string{"email": addr}), http.StatusOK, en(keyCheckEmail))
		l, err := h.applier.State().Link(email.HashToken(tokenOf(h.lastLink(addr, fsm.EmailRegistration))))
		if err != nil || (l.Continue == resume) != tc.back {
			t.Errorf("resume of %d: link continues with %d bytes (%v)", tc.n, len(l.Continue), err)
		}
	}
}
