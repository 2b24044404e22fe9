package signin

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/sms"
)

// outbox is an sms.Sender that keeps the messages.
type outbox struct {
	mu  sync.Mutex
	out []sms.Message
}

func (o *outbox) Send(_ context.Context, m sms.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.out = append(o.out, m)
	return nil
}

func (o *outbox) sent() []sms.Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.out)
}

const hPhone = "+15551234567"

// requestCode posts the sign-in page's text-message button with phone.
func (b *browser) requestCode(phone string) page {
	b.t.Helper()
	return b.submit(postForm(b.t, b.get(authzPath(authzQuery(hPublic, false))), "method"), "method", "sms", map[string]string{"phone": phone})
}

// postCode posts code on the code page p (its button has no name).
func (b *browser) postCode(p page, code string) page {
	b.t.Helper()
	forms := parseForms(b.t, p.body)
	i := slices.IndexFunc(forms, func(f htmlForm) bool { return f.method == "post" && slices.Contains(f.inputs, "code") })
	if i < 0 {
		b.t.Fatalf("no code form (status %d):\n%s", p.status, p.body)
	}
	v := forms[i].hidden
	v.Set("code", code)
	return b.post(forms[i].action, v)
}

// TestTextMessageSignIn: a known number gets a code (the page shows only
// its last digits); a wrong code re-shows the page with 400; the right
// one opens a session of acr phone, amr sms.
func TestTextMessageSignIn(t *testing.T) {
	box := &outbox{}
	h := newHarness(t, func(c *Config) { c.SMS = box })
	h.apply(fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUser, Phone: ptr(hPhone), At: h.clock.Now()})
	b := h.browser()
	p := b.requestCode("+1 (555) 123-4567")
	if p.status != http.StatusOK || strings.Contains(p.body, hPhone) || !strings.Contains(p.body, "4567") {
		t.Fatalf("code page: %d\n%s", p.status, p.body)
	}
	msgs := box.sent()
	if len(msgs) != 1 || msgs[0].To != hPhone || len(msgs[0].Code) != 6 || !strings.Contains(msgs[0].Text, msgs[0].Code) {
		t.Fatalf("messages: %+v", msgs)
	}
	wrong := "000000"
	if msgs[0].Code == wrong {
		wrong = "111111"
	}
	p = b.postCode(p, wrong)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, testText(t, language.English, msgBadCode)) {
		t.Fatalf("wrong code: %d\n%s", p.status, p.body)
	}
	got := done(t, b.postCode(p, msgs[0].Code))
	if got.User != hUser || got.ACR != authn.ACRPhone || !slices.Equal(got.AMR, []string{authn.AMRSMS}) {
		t.Fatalf("signed in: %+v", got)
	}
}

// TestTextMessageUnknownNumber: a number nobody holds gets the same code
// page, and no message goes out; its code opens nothing.
func TestTextMessageUnknownNumber(t *testing.T) {
	box := &outbox{}
	h := newHarness(t, func(c *Config) { c.SMS = box })
	b := h.browser()
	p := b.requestCode("+15559876543")
	if p.status != http.StatusOK || len(box.sent()) != 0 {
		t.Fatalf("unknown number: %d, %d messages", p.status, len(box.sent()))
	}
	if p = b.postCode(p, "123456"); p.status != http.StatusBadRequest {
		t.Fatalf("a guess for an unknown number: %d", p.status)
	}
}

// TestTextMessageRefusals: a malformed number and a node without a sender
// re-show the sign-in page with 400; the sixth message to one number in
// the hour is refused with 429.
func TestTextMessageRefusals(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	f := postForm(t, b.get(authzPath(authzQuery(hPublic, false))), "method")
	if slices.Contains(f.buttons, [2]string{"method", "sms"}) {
		t.Fatal("the sign-in page offers text messages without a sender")
	}
	v := f.hidden
	v.Set("method", "sms")
	v.Set("phone", hPhone)
	if p := b.post(f.action, v); p.status != http.StatusBadRequest || !strings.Contains(p.body, testText(t, language.English, msgSMSDisabled)) {
		t.Fatalf("without a sender: %d\n%s", p.status, p.body)
	}
	box := &outbox{}
	h = newHarness(t, func(c *Config) { c.SMS = box })
	if p := h.browser().requestCode("555"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "Enter your phone number in international format") {
		t.Fatalf("malformed number: %d\n%s", p.status, p.body)
	}
	h.apply(fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUser, Phone: ptr(hPhone), At: h.clock.Now()})
	for i := range 5 {
		if p := h.browser().requestCode(hPhone); p.status != http.StatusOK {
			t.Fatalf("message %d: %d", i+1, p.status)
		}
	}
	if p := h.browser().requestCode(hPhone); p.status != http.StatusTooManyRequests || !strings.Contains(p.body, testText(t, language.English, msgSMSLimit)) {
		t.Fatalf("sixth message: %d\n%s", p.status, p.body)
	}
	if n := len(box.sent()); n != 5 {
		t.Errorf("%d messages sent, want 5", n)
	}
}

func ptr[T any](v T) *T { return &v }
