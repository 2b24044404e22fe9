package smtptest_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/testkit/smtptest"
)

// TestStandardClient drives the kit with the standard library's client:
// STARTTLS, AUTH PLAIN, and a multipart message read back in parts.
func TestStandardClient(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "u", Password: "p"})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(srv.CAPEM)) {
		t.Fatal("CAPEM holds no certificate")
	}
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("STARTTLS not offered")
	}
	if ok, _ := c.Extension("AUTH"); ok {
		t.Fatal("AUTH offered before TLS")
	}
	if err := c.StartTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: pool}); err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(smtp.PlainAuth("", "u", "p", "127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("a@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("b@example.com"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	body := "To: b@example.com\r\nSubject: =?UTF-8?q?R=C3=A9sum=C3=A9?=\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/alternative; boundary=XX\r\n\r\n" +
		"--XX\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nd=C3=A9j=C3=A0\r\n" +
		"--XX\r\nContent-Type: text/html; charset=UTF-8\r\n\r\n<p>.hi</p>\r\n--XX--\r\n"
	if _, err := w.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	m := srv.Messages(1, 5*time.Second)[0]
	if !m.TLS || m.AuthUser != "u" || m.From != "a@example.com" || strings.Join(m.Rcpt, ",") != "b@example.com" {
		t.Errorf("session: %+v", m)
	}
	if m.Subject != "Résumé" || m.To != "b@example.com" || strings.TrimSpace(m.Text) != "déjà" || strings.TrimSpace(m.HTML) != "<p>.hi</p>" {
		t.Errorf("message: subject %q to %q text %q html %q", m.Subject, m.To, m.Text, m.HTML)
	}
}

// TestNoStartTLS: the option leaves STARTTLS out.
func TestNoStartTLS(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{NoStartTLS: true})
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Fatal("STARTTLS offered")
	}
}
