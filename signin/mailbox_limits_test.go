package signin

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// Mail is counted by the mailbox it reaches, across every kind a person
// or a stranger can cause (password_reset, registration, verify_email,
// email_changed), and by the client address that asked: the limits of
// docs/operators/self-service.md. Refused requests answer the page a sent
// one does.

// changeAddress asks, from b's account page home, for addr as the new
// address.
func (b *browser) changeAddress(home page, addr string) page {
	b.t.Helper()
	return b.submit(formWith(b.t, home, "action", "email-change"), "action", "email-change", map[string]string{"new_email": addr})
}

// register asks for a registration of addr from the registration page rp.
func (b *browser) register(rp page, addr string) page {
	b.t.Helper()
	return b.fill(onlyPostForm(b.t, rp), map[string]string{"email": addr})
}

// inMailbox counts the messages to local@domain and to its subaddresses
// (local+anything@domain), in any case: what one person's mailbox holds.
func (h *harness) inMailbox(local, domain string) (n int, kinds []string) {
	h.t.Helper()
	for _, m := range h.outbox() {
		l, d, _ := strings.Cut(strings.ToLower(m.To), "@")
		if base, _, _ := strings.Cut(l, "+"); base == local && d == domain {
			n++
			kinds = append(kinds, m.Kind+" to "+m.To)
		}
	}
	return n, kinds
}

// sealedFields blanks what differs between two renderings of one page:
// the CSRF token and the sealed step of its forms.
var sealedFields = regexp.MustCompile(`(name="(?:csrf_token|step)" value=")[^"]*"`)

func withoutSealed(body string) string { return sealedFields.ReplaceAllString(body, `$1"`) }

// sameAnswer fails unless got answers as want does, once the sealed
// fields are blanked and the address got names is read as want's.
func sameAnswer(t *testing.T, what string, got page, gotAddr string, want page, wantAddr string) {
	t.Helper()
	g := strings.ReplaceAll(withoutSealed(got.body), htmlEscape(gotAddr), htmlEscape(wantAddr))
	if got.status != want.status || g != withoutSealed(want.body) {
		t.Errorf("%s answers otherwise than a request that was sent (%d, want %d):\n%s\nwant:\n%s", what, got.status, want.status, got.body, want.body)
	}
}

// TestRegistrationPlusAddressesOneMailbox: registrations of
// subaddresses of one mailbox count as that mailbox: 3 an hour, not 3 for
// each, and the page says the same for the refused ones.
func TestRegistrationPlusAddressesOneMailbox(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("example.com")
	b := h.browser()
	rp := b.registerPage(authzQuery(hPublic, false))
	var first page
	for i, typed := range []string{"mal+1@example.com", "mal+2@example.com", "Mal+3@Example.com", "mal+4@example.com", "MAL@example.com", "mal+@example.com"} {
		addr := strings.ToLower(typed)
		p := b.register(rp, typed)
		wantPage(t, typed, p, http.StatusOK, en(keyRegisterSent, addr))
		if i == 0 {
			first = p
		} else {
			sameAnswer(t, typed, p, addr, first, "mal+1@example.com")
		}
	}
	if n, kinds := h.inMailbox("mal", "example.com"); n != 3 {
		t.Errorf("registration messages to one mailbox in an hour: %d, want 3: %q", n, kinds)
	}
	h.clock.Add(time.Hour + time.Minute)
	b.register(b.registerPage(authzQuery(hPublic, false)), "mal+5@example.com")
	if n, kinds := h.inMailbox("mal", "example.com"); n != 4 {
		t.Errorf("an hour later: %d, want 4: %q", n, kinds)
	}
}

// TestResetAndAddressCheckCountedTogether: reset messages to Bob and the
// links Ann asks /account to send to Bob's subaddresses are counted
// together, and what is refused looks sent.
func TestResetAndAddressCheckCountedTogether(t *testing.T) {
	h := newMailHarness(t)
	resetPage := h.browser().forgot(hEmailB)
	h.browser().forgot(hEmailB)
	ann := h.browser()
	home := ann.accountSignIn(hEmail, hPassword)
	sent := ann.changeAddress(home, "bob+ann@example.com")
	wantPage(t, "the first change", sent, http.StatusOK, en(keyEmailPending, "bob+ann@example.com", hEmail))
	if n, kinds := h.inMailbox("bob", "example.com"); n != 3 {
		t.Fatalf("messages to Bob's mailbox: %d, want 3: %q", n, kinds)
	}

	// Bob's mailbox has had its 3 this hour: neither kind goes out, and
	// neither page tells.
	if p := h.browser().forgot(hEmailB); p.status != resetPage.status || p.body != resetPage.body {
		t.Errorf("a refused reset answers otherwise:\n%s", p.body)
	}
	again := ann.changeAddress(home, "bob+again@example.com")
	sameAnswer(t, "a refused change", again, "bob+again@example.com", sent, "bob+ann@example.com")
	if n, kinds := h.inMailbox("bob", "example.com"); n != 3 {
		t.Errorf("messages to Bob's mailbox after the limit: %d, want 3: %q", n, kinds)
	}
	// The refused change stored no link: Ann's earlier one still works.
	wantPage(t, "the earlier link", h.browser().get(h.lastLink("bob+ann@example.com", fsm.EmailVerify)), http.StatusOK, "Confirm")
}

// TestMailboxCaseFoldedAcrossKinds: an address in any case, with or
// without a subaddress, is one mailbox for every kind of message.
func TestMailboxCaseFoldedAcrossKinds(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("example.com")
	h.browser().forgot("BOB@EXAMPLE.COM")
	ann := h.browser()
	home := ann.accountSignIn(hEmail, hPassword)
	ann.changeAddress(home, "Bob+Ann@Example.COM")
	b := h.browser()
	rp := b.registerPage(authzQuery(hPublic, false))
	b.register(rp, "Bob+Reg@EXAMPLE.com")
	if n, kinds := h.inMailbox("bob", "example.com"); n != 3 {
		t.Fatalf("messages to Bob's mailbox: %d, want 3: %q", n, kinds)
	}
	h.browser().forgot(" bob@Example.com")
	b.register(rp, "BOB+again@example.com")
	ann.changeAddress(home, "bOB+2@example.COM")
	if n, kinds := h.inMailbox("bob", "example.com"); n != 3 {
		t.Errorf("messages to Bob's mailbox, spelled otherwise: %d, want 3: %q", n, kinds)
	}
}

// TestMailboxDailyLimit: 3 an hour, and 10 a day, to one mailbox.
func TestMailboxDailyLimit(t *testing.T) {
	h := newMailHarness(t)
	want := 0
	for _, n := range []int{3, 3, 3, 1} {
		for range 3 {
			h.browser().forgot(hEmailB)
		}
		want += n
		if got := len(h.mailsTo(hEmailB)); got != want {
			t.Fatalf("after %d: %d messages", want, got)
		}
		h.clock.Add(time.Hour + time.Minute)
	}
	h.browser().forgot(hEmailB)
	if got := len(h.mailsTo(hEmailB)); got != 10 {
		t.Errorf("a day's eleventh went out: %d messages", got)
	}
	h.clock.Add(24 * time.Hour)
	h.browser().forgot(hEmailB)
	if got := len(h.mailsTo(hEmailB)); got != 11 {
		t.Errorf("the next day: %d messages, want 11", got)
	}
}

// TestMailPerClientAddress: one client address causes at most 20
// messages an hour, of every kind together, each to another mailbox; the
// 21st answers as the others do.
func TestMailPerClientAddress(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("example.com")
	now := h.clock.Now()
	hash := h.hash(hPassword)
	for i := range 7 {
		h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: fmt.Sprintf("1e000000-0000-4000-8000-%012d", i),
			Email: fmt.Sprintf("reset%d@example.com", i), PasswordHash: hash, CreatedAt: now}})
	}
	ann, bob := h.browser(), h.browser()
	annHome, bobHome := ann.accountSignIn(hEmail, hPassword), bob.accountSignIn(hEmailB, hPassword)
	reg := h.browser()
	rp := reg.registerPage(authzQuery(hPublic, false))
	var addrs []string
	for i := range 7 {
		addrs = append(addrs, fmt.Sprintf("reset%d@example.com", i))
		h.browser().forgot(addrs[len(addrs)-1])
	}
	for i := range 7 {
		addrs = append(addrs, fmt.Sprintf("reg%d@example.com", i))
		reg.register(rp, addrs[len(addrs)-1])
	}
	for i := range 5 {
		addrs = append(addrs, fmt.Sprintf("ann%d@example.net", i))
		ann.changeAddress(annHome, addrs[len(addrs)-1])
	}
	bob.changeAddress(bobHome, "bob0@example.net")
	addrs = append(addrs, "bob0@example.net")
	last := bob.changeAddress(bobHome, "bob1@example.net") // the 21st
	wantPage(t, "the 21st request", last, http.StatusOK, en(keyEmailPending, "bob1@example.net", hEmailB))
	n := 0
	for _, a := range addrs {
		if len(h.mailsTo(a)) != 1 {
			t.Errorf("%s: %d messages, want 1", a, len(h.mailsTo(a)))
		}
		n += len(h.mailsTo(a))
	}
	if len(addrs) != 20 || n != 20 {
		t.Errorf("messages from one client address: %d to %d addresses, want 20", n, len(addrs))
	}
	if got := len(h.mailsTo("bob1@example.net")); got != 0 {
		t.Errorf("the 21st request sent %d messages", got)
	}
}

// TestAddressChangeNoticeCounted: the email_changed notice to the old
// address counts against that mailbox like any other message, and is
// never dropped: while the old mailbox has had its messages for the hour
// the change waits (its link keeps working), and once the hour is over
// the change and its notice go through.
func TestAddressChangeNoticeCounted(t *testing.T) {
	h := newMailHarness(t)
	const newAddr = "ann.new@example.org"
	b := h.browser()
	home := b.accountSignIn(hEmail, hPassword)
	b.changeAddress(home, newAddr)
	link := h.lastLink(newAddr, fsm.EmailVerify)
	for range 3 {
		h.browser().forgot(hEmail) // someone fills Ann's mailbox's hour
	}
	before := len(h.mailsTo(hEmail))
	if before != 3 {
		t.Fatalf("resets to Ann: %d", before)
	}
	other := h.browser()
	p := other.fill(onlyPostForm(t, other.get(link)), nil)
	wantPage(t, "the link while the old mailbox is full", p, http.StatusTooManyRequests, en(keyNoticeLimitTitle))
	if u, _ := h.applier.State().User(hUser); u.Email != hEmail {
		t.Fatalf("the address changed without its notice: %+v", u)
	}
	if n := len(h.mailsTo(hEmail)); n != before {
		t.Errorf("%d messages to the old address, want %d", n, before)
	}

	h.clock.Add(time.Hour + time.Minute)
	p = other.fill(onlyPostForm(t, other.get(link)), nil)
	wantPage(t, "the link an hour later", p, http.StatusOK, en(keyEmailVerifiedTitle))
	ms := h.mailsTo(hEmail)
	if len(ms) != before+1 || ms[len(ms)-1].Kind != fsm.EmailChanged {
		t.Errorf("messages to the old address: %d, want the notice as the %dth", len(ms), before+1)
	}
	// The notice was counted: the old mailbox has 2 of its next hour's 3
	// left (nobody has the address now, so registration is what reaches
	// it).
	h.openRegistration("example.com")
	rb := h.browser()
	rp := rb.registerPage(authzQuery(hPublic, false))
	for range 3 {
		rb.register(rp, hEmail)
	}
	if n := len(h.mailsTo(hEmail)); n != before+3 {
		t.Errorf("messages to the old address after three registrations: %d, want %d", n, before+3)
	}
}
