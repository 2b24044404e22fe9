package email

import (
	"context"
	"mime"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/mail"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/internal/testkit/smtptest"
)

// TestDeliveredThroughARealRelay: a committed invitation goes through a
// real Exim with STARTTLS (its certificate checked against the test CA)
// and AUTH, and arrives in the maildir with its encoded non-ASCII subject,
// the From and To, and both parts holding the link; the state records it
// sent and drops its body.
func TestDeliveredThroughARealRelay(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "oidcd", Password: "relay secret"})
	cfg, err := mail.ParseURL("smtp://oidcd:relay%20secret@"+srv.Addr(), "Identité <id@example.com>", srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := mail.NewSMTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := fsmtest.New(t)
	k := newKEK(t)
	s, err := NewSender(SenderConfig{State: a.State(), Applier: a, KEK: k, Mail: []mail.Sender{relay}})
	if err != nil {
		t.Fatal(err)
	}
	a.FSM.OnApply = s.OnApply
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	const link = "https://id.example.com/invite/tok3n_Abc-123"
	m, err := Compose(Invitation, "en", Data{Site: "id.example.com", Link: link, OrgName: "Société Générale", Expires: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	o, err := Outgoing(k, "Zoé Durand <zoe@example.com>", fsm.EmailInvitation, "en", "", m)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Apply(context.Background(), fsm.MustCommand(fsm.TypeEnqueueEmail, fsm.EnqueueEmail{Emails: []fsm.OutgoingEmail{o}, At: time.Now()}))
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	id := res.Value.([]fsm.Email)[0].ID

	got := srv.Messages(1, 20*time.Second)[0]
	if want := "You are invited to Société Générale on id.example.com"; got.Subject != want || m.Subject != want {
		t.Errorf("Subject = %q, composed %q, want %q", got.Subject, m.Subject, want)
	}
	if raw := got.Header.Get("Subject"); !strings.HasPrefix(raw, "=?UTF-8?") {
		t.Errorf("raw Subject %q is not an encoded word", raw)
	}
	if !got.TLS || got.AuthUser != "oidcd" {
		t.Errorf("TLS %v, authenticated as %q", got.TLS, got.AuthUser)
	}
	if len(got.Rcpt) != 1 || got.Rcpt[0] != "zoe@example.com" || got.From != "id@example.com" || !strings.Contains(got.To, "zoe@example.com") {
		t.Errorf("envelope from %q to %q, To %q", got.From, got.Rcpt, got.To)
	}
	if from, err := new(mime.WordDecoder).DecodeHeader(got.Header.Get("From")); err != nil || from != "Identité <id@example.com>" {
		t.Errorf("From %q (raw %q): %v", from, got.Header.Get("From"), err)
	}
	if ct := got.Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/alternative") {
		t.Errorf("Content-Type %q", ct)
	}
	if !strings.Contains(got.Text, link) || !strings.Contains(got.HTML, `href="`+link+`"`) || !strings.Contains(got.HTML, "Société Générale") {
		t.Errorf("parts:\ntext %q\nhtml %q", got.Text, got.HTML)
	}
	for _, h := range []string{"Date", "Message-Id"} {
		if got.Header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, err := a.State().Email(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.State == fsm.EmailSent {
			if e.Body != nil || e.Attempts != 1 {
				t.Fatalf("recorded %+v", e)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recorded sent: %+v", e)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
