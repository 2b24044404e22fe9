package mail_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/mail"
	"github.com/oidcd/oidcd/internal/testkit/smtptest"
)

const subject = "Réinitialiser votre mot de passe"

func reset() mail.Message {
	return mail.Message{
		To:      "Zoé Durand <zoe@example.com>",
		Subject: subject,
		Text:    "Suivez ce lien : https://id.example.com/password/reset/abc\n",
		HTML:    `<p>Suivez <a href="https://id.example.com/password/reset/abc">ce lien</a>.</p>`,
	}
}

func sender(t *testing.T, rawURL, caFile string) *mail.SMTP {
	t.Helper()
	cfg, err := mail.ParseURL(rawURL, "Identité <id@example.com>", caFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := mail.NewSMTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func checkReceived(t *testing.T, m smtptest.Message) {
	t.Helper()
	if !m.TLS {
		t.Error("message was received over a plain connection")
	}
	if m.Subject != subject {
		t.Errorf("Subject = %q, want %q", m.Subject, subject)
	}
	if raw := m.Header.Get("Subject"); !strings.HasPrefix(raw, "=?UTF-8?") {
		t.Errorf("raw Subject %q is not an encoded word", raw)
	}
	if len(m.Rcpt) != 1 || m.Rcpt[0] != "zoe@example.com" || m.From != "id@example.com" {
		t.Errorf("envelope from %q to %q", m.From, m.Rcpt)
	}
	if !strings.Contains(m.To, "zoe@example.com") {
		t.Errorf("To = %q", m.To)
	}
	if m.Header.Get("Date") == "" || m.Header.Get("Message-ID") == "" {
		t.Errorf("Date %q, Message-ID %q", m.Header.Get("Date"), m.Header.Get("Message-ID"))
	}
	if !strings.HasPrefix(m.Header.Get("Content-Type"), "multipart/alternative") {
		t.Errorf("Content-Type = %q", m.Header.Get("Content-Type"))
	}
	want := reset()
	if strings.TrimRight(m.Text, "\r\n") != strings.TrimRight(strings.ReplaceAll(want.Text, "\n", "\r\n"), "\r\n") {
		t.Errorf("text part = %q", m.Text)
	}
	if !strings.Contains(m.HTML, want.HTML) {
		t.Errorf("HTML part = %q", m.HTML)
	}
}

func TestSTARTTLSWithAuth(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "oidcd", Password: "relay secret"})
	cfg, err := mail.ParseURL("smtp://oidcd:relay%20secret@"+srv.Addr(), "Identité <id@example.com>", srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := mail.NewSMTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx(t), reset()); err != nil {
		t.Fatal(err)
	}
	m := srv.Messages(1, 10*time.Second)[0]
	checkReceived(t, m)
	if m.AuthUser != "oidcd" {
		t.Errorf("authenticated as %q", m.AuthUser)
	}
}

func TestSMTPSImplicitTLS(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "oidcd", Password: "relay-secret"})
	if err := sender(t, srv.SMTPSURL(), srv.CAFile).Send(ctx(t), reset()); err != nil {
		t.Fatal(err)
	}
	m := srv.Messages(1, 10*time.Second)[0]
	checkReceived(t, m)
	if m.AuthUser != "oidcd" {
		t.Errorf("authenticated as %q", m.AuthUser)
	}
}

func TestWrongAuthIsAuthStep(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "oidcd", Password: "right"})
	err := sender(t, "smtp://oidcd:wrong@"+srv.Addr(), srv.CAFile).Send(ctx(t), reset())
	var me *mail.Error
	if !errors.As(err, &me) || me.Step != mail.StepAuth || me.Temporary {
		t.Fatalf("err = %v, want a permanent auth failure", err)
	}
	if srv.Count() != 0 {
		t.Fatal("a message was delivered")
	}
}

func TestUntrustedCertificateRefused(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	other := smtptest.Start(t, smtptest.Options{}) // its CA did not sign srv's certificate
	for _, u := range []string{srv.URL(), srv.SMTPSURL()} {
		err := sender(t, u, other.CAFile).Send(ctx(t), reset())
		var me *mail.Error
		if !errors.As(err, &me) || me.Step != mail.StepTLSVerify || me.Temporary {
			t.Errorf("%s: err = %v, want a permanent TLS verification failure", u, err)
		}
	}
	if srv.Count() != 0 {
		t.Fatal("a message was delivered")
	}
}

func TestNoSTARTTLSRefusedBeforeAnyMessage(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{NoStartTLS: true})
	err := sender(t, srv.URL(), srv.CAFile).Send(ctx(t), reset())
	var me *mail.Error
	if !errors.As(err, &me) || me.Step != mail.StepStartTLS || me.Temporary {
		t.Fatalf("err = %v, want a permanent STARTTLS failure", err)
	}
	if srv.Count() != 0 {
		t.Fatal("a message was delivered in the clear")
	}
}

// TestNoSTARTTLSNoMailCommand checks on the wire that nothing past EHLO is
// said to a server that does not offer STARTTLS.
func TestNoSTARTTLSNoMailCommand(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := make(chan []string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			seen <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var cmds []string
		r := bufio.NewReader(c)
		fmt.Fprint(c, "220 plain ESMTP\r\n")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			verb, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			cmds = append(cmds, strings.ToUpper(verb))
			switch strings.ToUpper(verb) {
			case "EHLO":
				fmt.Fprint(c, "250-plain\r\n250 8BITMIME\r\n")
			case "QUIT":
				fmt.Fprint(c, "221 bye\r\n")
			default:
				fmt.Fprint(c, "250 ok\r\n")
			}
		}
		seen <- cmds
	}()
	err = sender(t, "smtp://"+l.Addr().String(), "").Send(ctx(t), reset())
	var me *mail.Error
	if !errors.As(err, &me) || me.Step != mail.StepStartTLS {
		t.Fatalf("err = %v", err)
	}
	for _, c := range <-seen {
		if c != "EHLO" && c != "HELO" && c != "QUIT" {
			t.Errorf("client sent %s to a server without STARTTLS", c)
		}
	}
}

func TestRejectedRecipient(t *testing.T) {
	for _, code := range []int{550, 450} {
		srv := smtptest.Start(t, smtptest.Options{RejectRcpt: "zoe@example.com", RejectCode: code})
		err := sender(t, srv.URL(), srv.CAFile).Send(ctx(t), reset())
		var me *mail.Error
		if !errors.As(err, &me) || me.Step != mail.StepRecipient || me.Temporary != (code == 450) {
			t.Errorf("%d: err = %v, want a recipient failure, temporary %v", code, err, code == 450)
		}
		if mail.IsTemporary(err) != (code == 450) {
			t.Errorf("%d: IsTemporary = %v", code, mail.IsTemporary(err))
		}
	}
}

func TestDialFailureIsTemporary(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = sender(t, "smtps://"+addr, "").Send(ctx(t), reset())
	var me *mail.Error
	if !errors.As(err, &me) || me.Step != mail.StepDial || !me.Temporary {
		t.Fatalf("err = %v, want a temporary dial failure", err)
	}
}

func TestHeaderInjectionRefused(t *testing.T) {
	dir := t.TempDir()
	out := mail.NewOutbox(filepath.Join(dir, "outbox"))
	s := sender(t, "smtps://127.0.0.1:1", "") // never dialled: the message is refused first
	for _, m := range []mail.Message{
		{To: "zoe@example.com\r\nBcc: all@example.com", Subject: "x", Text: "x"},
		{To: "zoe@example.com\nBcc: all@example.com", Subject: "x", Text: "x"},
		{To: "zoe@example.com", Subject: "x\r\nBcc: all@example.com", Text: "x"},
		{To: "zoe@example.com", Subject: "x\rBcc: all@example.com", Text: "x"},
		{To: "not an address", Subject: "x", Text: "x"},
	} {
		for name, snd := range map[string]mail.Sender{"smtp": s, "outbox": out} {
			err := snd.Send(ctx(t), m)
			var me *mail.Error
			if !errors.As(err, &me) || me.Step != mail.StepMessage || me.Temporary {
				t.Errorf("%s %q/%q: err = %v, want a refused message", name, m.To, m.Subject, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "outbox")); !os.IsNotExist(err) {
		t.Errorf("outbox written for a refused message: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url      string
		host     string
		port     int
		implicit bool
		user     string
		pass     string
	}{
		{"smtp://mail.example.com", "mail.example.com", 587, false, "", ""},
		{"smtps://mail.example.com", "mail.example.com", 465, true, "", ""},
		{"smtp://u%40x:p%3Aw@mail.example.com:2525", "mail.example.com", 2525, false, "u@x", "p:w"},
		{"smtps://[::1]:4650", "::1", 4650, true, "", ""},
	} {
		c, err := mail.ParseURL(tc.url, "id@example.com", "")
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if c.Host != tc.host || c.Port != tc.port || c.Implicit != tc.implicit || c.Username != tc.user || c.Password != tc.pass || c.RootCAs != nil {
			t.Errorf("%s: %+v", tc.url, c)
		}
	}
	const password = "s3cr3t-Pa55"
	for _, bad := range []string{
		"http://mail.example.com", "smtp://", "smtp://h:0", "smtp://h:99999", "smtp://h/path", "smtp://h?x=1", "mail.example.com",
		"smtp://h?starttls=false", "smtp+plain://h", "smtp://u:" + password + "@h:port", "smtp://u:" + password + "@[::1",
		"http://u:" + password + "@h", "smtp://u:" + password + "@h/x", "smtp://u:" + password + "@h:99999", "smtp://u:" + password + "@",
		"smtp://u:" + password + "@h\x7f",
	} {
		_, err := mail.ParseURL(bad, "id@example.com", "")
		var ce *mail.ConfigError
		if !errors.As(err, &ce) || ce.Field != mail.FieldURL {
			t.Errorf("%s: err = %v, want a refused URL", bad, err)
			continue
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("%s: the error shows the password: %v", bad, err)
		}
	}
	for _, from := range []string{"", "not an address", "id@example.com\r\nBcc: x@y", "a@b, c@d"} {
		_, err := mail.ParseURL("smtp://h", from, "")
		var ce *mail.ConfigError
		if !errors.As(err, &ce) || ce.Field != mail.FieldFrom {
			t.Errorf("From %q: err = %v, want a refused From", from, err)
		}
	}
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	for _, ca := range []string{junk, filepath.Join(dir, "missing.pem")} {
		_, err := mail.ParseURL("smtp://h", "id@example.com", ca)
		var ce *mail.ConfigError
		if !errors.As(err, &ce) || ce.Field != mail.FieldCAFile {
			t.Errorf("CA file %s: err = %v, want a refused CA file", ca, err)
		}
	}
}

func TestOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	o := mail.NewOutbox(path)
	first := reset()
	first.Kind, first.Link, first.Locale = "password_reset", "https://id.example.com/password/reset/abc", "fr"
	second := mail.Message{To: "bob@example.com", Subject: "Invitation", Text: "Bienvenue", Kind: "email_changed", Locale: "en"}
	for _, m := range []mail.Message{first, second} {
		if err := o.Send(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), b)
	}
	for i, tc := range []struct {
		want mail.Message
		keys []string // exactly the keys of the line
	}{
		{first, []string{"html", "kind", "link", "locale", "sent_at", "subject", "text", "to"}},
		{second, []string{"kind", "link", "locale", "sent_at", "subject", "text", "to"}},
	} {
		var raw map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &raw); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		var keys []string
		for k := range raw {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tc.keys) {
			t.Errorf("line %d: keys %q, want %q", i, keys, tc.keys)
		}
		var got mail.OutboxLine
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		w := tc.want
		if got.To != w.To || got.Subject != w.Subject || got.Text != w.Text || got.HTML != w.HTML || got.Kind != w.Kind ||
			got.Link != w.Link || got.Locale != w.Locale || time.Since(got.SentAt) > time.Minute || got.SentAt.Location() != time.UTC {
			t.Errorf("line %d = %+v, want %+v", i, got, w)
		}
	}
}

// TestOutboxUnwritableIsTemporary: a file that cannot be written (its
// directory is missing) is worth trying again later.
func TestOutboxUnwritableIsTemporary(t *testing.T) {
	o := mail.NewOutbox(filepath.Join(t.TempDir(), "missing", "outbox.jsonl"))
	err := o.Send(ctx(t), reset())
	var me *mail.Error
	if !errors.As(err, &me) || me.Step != mail.StepOutbox || !me.Temporary {
		t.Fatalf("err = %v, want a temporary outbox failure", err)
	}
}

// TestKindLinkLocaleAreNoHeaders: what describes a message for the
// outbox file never becomes a header of the mail itself.
func TestKindLinkLocaleAreNoHeaders(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	m := reset()
	m.Kind, m.Link, m.Locale = "password_reset", "https://id.example.com/password/reset/abc", "fr"
	if err := sender(t, srv.URL(), srv.CAFile).Send(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	got := srv.Messages(1, 10*time.Second)[0]
	checkReceived(t, got)
	head, _, _ := strings.Cut(string(got.Raw), "\r\n\r\n")
	for _, s := range []string{"password_reset", "Kind", "Locale"} {
		if strings.Contains(head, s) {
			t.Errorf("the headers hold %q:\n%s", s, head)
		}
	}
}

func TestCancelledSendIsTemporary(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	c, cancel := context.WithCancel(context.Background())
	cancel()
	err := sender(t, srv.URL(), srv.CAFile).Send(c, reset())
	if err == nil || !mail.IsTemporary(err) {
		t.Fatalf("err = %v, want a temporary failure", err)
	}
	if srv.Count() != 0 {
		t.Fatal("a message was delivered")
	}
}

// TestCancelWhileTheRelayHangs: a relay that accepts the connection and
// never greets does not hold a cancelled send (a leader stepping down)
// for the 30 s time-out: the send returns at once, temporary.
func TestCancelWhileTheRelayHangs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the test ends
		}
	}()
	for _, u := range []string{"smtp://" + l.Addr().String(), "smtps://" + l.Addr().String()} {
		c, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		err := sender(t, u, "").Send(c, reset())
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: the cancelled send took %v", u, took)
		}
		if !mail.IsTemporary(err) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want a temporary failure from the cancel", u, err)
		}
	}
}
