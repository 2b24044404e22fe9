// Package mail sends the provider's messages (invitations, password
// resets) through the site's own mail relay, or appends them to an outbox
// file for tests and dry runs.
//
// An smtp:// relay must offer STARTTLS: a message is never sent in the
// clear. An smtps:// relay speaks TLS from the first byte. The server's
// certificate is verified against a CA file when one is given, else the
// system's roots, for the host named in the URL.
//
// A failed send says which step failed (dial, STARTTLS, TLS verification,
// authentication, a refused recipient, ...) and whether it is worth trying
// again (Temporary): a 4xx answer or a network failure is, a 5xx answer or
// a configuration fault is not.
package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Default ports: submission with STARTTLS, and submissions (implicit TLS).
const (
	DefaultSMTPPort  = 587
	DefaultSMTPSPort = 465
)

// Timeout bounds each network step of one send when the caller's context
// has no earlier deadline.
const Timeout = 30 * time.Second

// Config is where and how to send.
type Config struct {
	Host     string // server name, also the name its certificate must carry
	Port     int
	Implicit bool // smtps://: TLS from the first byte; else STARTTLS, required
	Username string
	Password string
	From     string // the From: address, validated
	// RootCAs verifies the server's certificate; nil means the system's.
	RootCAs *x509.CertPool
}

// ConfigError is a setting ParseURL refuses; Field names which one. Its
// text never holds the URL's password.
type ConfigError struct {
	Field string // FieldURL, FieldFrom or FieldCAFile
	Err   error
}

// The settings ParseURL reads.
const (
	FieldURL    = "url"
	FieldFrom   = "from"
	FieldCAFile = "ca-file"
)

func (e *ConfigError) Error() string {
	what := map[string]string{FieldURL: "SMTP URL", FieldFrom: "From address", FieldCAFile: "SMTP CA file"}[e.Field]
	return fmt.Sprintf("mail: %s: %v", what, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ParseURL reads smtp://[user:pass@]host[:port] or smtps://... with the
// From address and an optional PEM CA file. There is no way to send in
// the clear: smtp:// always requires STARTTLS. An error never repeats the
// URL, which may hold a password.
func ParseURL(rawURL, from, caFile string) (Config, error) {
	bad := func(field string, err error) (Config, error) { return Config{}, &ConfigError{Field: field, Err: err} }
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL, password and all: keep only why.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad(FieldURL, err)
	}
	var c Config
	switch u.Scheme {
	case "smtp":
		c.Port = DefaultSMTPPort
	case "smtps":
		c.Implicit, c.Port = true, DefaultSMTPSPort
	default:
		return bad(FieldURL, fmt.Errorf("scheme %q: want smtp:// (STARTTLS, always required) or smtps:// (TLS from the first byte)", u.Scheme))
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return bad(FieldURL, errors.New("only scheme, user, password, host and port are allowed (no path or options: STARTTLS cannot be turned off)"))
	}
	c.Host = u.Hostname()
	if c.Host == "" {
		return bad(FieldURL, errors.New("no host"))
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad(FieldURL, fmt.Errorf("port %q", p))
		}
		c.Port = n
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	if c.From, err = ParseAddress(from); err != nil {
		return bad(FieldFrom, err)
	}
	if caFile != "" {
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			return bad(FieldCAFile, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pemBytes) {
			return bad(FieldCAFile, fmt.Errorf("%s holds no PEM certificate", caFile))
		}
	}
	return c, nil
}

// ParseAddress validates one RFC 5322 address (a display name is allowed)
// and returns it in its canonical form. CR and LF are refused outright.
func ParseAddress(s string) (string, error) {
	if strings.ContainsAny(s, "\r\n") {
		return "", errors.New("address holds a line break")
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", s, err)
	}
	return a.String(), nil
}

// Message is one message to one person: a plain text part and, when HTML
// is set, an HTML alternative. Kind, Link and Locale describe it for the
// outbox file; they never become headers.
type Message struct {
	To      string
	Subject string
	Text    string
	HTML    string
	Kind    string // why it is sent (invitation, password_reset, ...)
	Link    string // the link it carries, "" for a notice
	Locale  string // the language it is written in
}

// check refuses what would let a caller write headers of its own.
func (m Message) check() error {
	if strings.ContainsAny(m.To, "\r\n") {
		return errors.New("mail: To holds a line break")
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return errors.New("mail: Subject holds a line break")
	}
	if _, err := mail.ParseAddress(m.To); err != nil {
		return fmt.Errorf("mail: To %q: %w", m.To, err)
	}
	if m.Text == "" {
		return errors.New("mail: message has no text")
	}
	return nil
}

// build makes the go-mail message: encoded headers, Date, Message-ID,
// multipart/alternative when there is HTML.
func build(from string, m Message) (*gomail.Msg, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	msg := gomail.NewMsg(gomail.WithCharset(gomail.CharsetUTF8), gomail.WithEncoding(gomail.EncodingQP))
	if err := msg.From(from); err != nil {
		return nil, fmt.Errorf("mail: From: %w", err)
	}
	if err := msg.To(m.To); err != nil {
		return nil, fmt.Errorf("mail: To: %w", err)
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// Sender sends one message.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Step names where a send failed.
type Step string

const (
	StepMessage   Step = "message"    // the message itself is unfit (bad address, line break)
	StepDial      Step = "dial"       // no connection to the server
	StepStartTLS  Step = "starttls"   // the server does not offer STARTTLS, or it failed
	StepTLSVerify Step = "tls verify" // the server's certificate is not trusted for its name
	StepAuth      Step = "auth"       // SMTP AUTH refused or not offered
	StepSender    Step = "sender"     // MAIL FROM refused
	StepRecipient Step = "recipient"  // RCPT TO refused
	StepData      Step = "data"       // the message body refused
	StepConnect   Step = "connect"    // the greeting or EHLO failed
	StepOutbox    Step = "outbox"     // the outbox file could not be written
)

// Error is a failed send.
type Error struct {
	Step Step
	// Temporary reports whether trying again later may succeed: a 4xx
	// answer or a network failure; not a 5xx answer or a configuration
	// fault (no STARTTLS, an untrusted certificate).
	Temporary bool
	Err       error
}

func (e *Error) Error() string {
	kind := "permanent"
	if e.Temporary {
		kind = "temporary"
	}
	return fmt.Sprintf("mail: %s failed (%s): %v", e.Step, kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// IsTemporary reports whether err is worth retrying.
func IsTemporary(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Temporary
}

// SMTP sends through a relay with go-mail.
type SMTP struct {
	cfg Config
}

// NewSMTP checks cfg and returns its sender.
func NewSMTP(cfg Config) (*SMTP, error) {
	if cfg.Host == "" || cfg.Port == 0 {
		return nil, errors.New("mail: SMTP host and port are required")
	}
	if _, err := ParseAddress(cfg.From); err != nil {
		return nil, fmt.Errorf("mail: From address: %w", err)
	}
	return &SMTP{cfg: cfg}, nil
}

// Send connects, secures the connection (STARTTLS is mandatory on
// smtp://), authenticates when the URL had a user, and sends m.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	msg, err := build(s.cfg.From, m)
	if err != nil {
		return &Error{Step: StepMessage, Err: err}
	}
	timeout := Timeout
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < timeout {
			timeout = left
		}
	}
	tlsConfig := &tls.Config{ServerName: s.cfg.Host, RootCAs: s.cfg.RootCAs, MinVersion: tls.VersionTLS12}
	// Our own dialer keeps the connection, which go-mail leaves open when
	// it gives up before a session exists (no STARTTLS, AUTH refused).
	// For smtps:// it speaks TLS from the first byte; go-mail then sees a
	// TLS connection, which counts as encrypted for AUTH, and asks for no
	// STARTTLS on it. For smtp:// STARTTLS is mandatory.
	//
	// go-mail heeds ctx only while it dials: the greeting, STARTTLS, AUTH
	// and the transaction read with its own timeout. So a cancelled send
	// closes the connection under it from the moment it exists, and
	// returns at once instead of waiting on a relay that hangs.
	var conn net.Conn
	stop := func() bool { return false }
	defer func() { stop() }()
	dial := func(dctx context.Context, network, addr string) (net.Conn, error) {
		d := &net.Dialer{}
		var err error
		if s.cfg.Implicit {
			conn, err = (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(dctx, network, addr)
		} else {
			conn, err = d.DialContext(dctx, network, addr)
		}
		if err == nil {
			c := conn
			stop = context.AfterFunc(ctx, func() { c.Close() })
		}
		return conn, err
	}
	opts := []gomail.Option{
		gomail.WithPort(s.cfg.Port),
		gomail.WithTimeout(timeout),
		gomail.WithTLSConfig(tlsConfig),
		gomail.WithDialContextFunc(dial),
	}
	if s.cfg.Implicit {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	c, err := gomail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return &Error{Step: StepConnect, Err: err}
	}
	sc, err := c.DialToSMTPClientWithContext(ctx)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		if ctx.Err() != nil {
			return &Error{Step: StepConnect, Temporary: true, Err: fmt.Errorf("%w: %w", ctx.Err(), err)}
		}
		return classifyDial(err, s.cfg.Implicit)
	}
	defer c.CloseWithSMTPClient(sc)
	if err := c.SendWithSMTPClient(sc, msg); err != nil {
		if ctx.Err() != nil {
			return &Error{Step: StepData, Temporary: true, Err: fmt.Errorf("%w: %w", ctx.Err(), err)}
		}
		return classifySend(err)
	}
	return nil
}

// classifyDial names the step of a failed connection: go-mail dials,
// greets, runs STARTTLS and AUTH in one call.
func classifyDial(err error, implicit bool) error {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		verifyErr *tls.CertificateVerificationError
		invalid   x509.CertificateInvalidError
	)
	s := err.Error()
	switch {
	case errors.As(err, &verifyErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid):
		return &Error{Step: StepTLSVerify, Err: err}
	case strings.Contains(s, "does not support STARTTLS"):
		return &Error{Step: StepStartTLS, Err: errors.New("the server does not offer STARTTLS; refusing to send in the clear")}
	case strings.Contains(s, "SMTP AUTH") || strings.Contains(s, "SMTP Auth"):
		return &Error{Step: StepAuth, Temporary: replyTemporary(err), Err: err}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return &Error{Step: StepDial, Temporary: true, Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Step: StepDial, Temporary: true, Err: err}
	}
	var tlsAlert tls.AlertError
	var recHdr tls.RecordHeaderError
	if errors.As(err, &tlsAlert) || errors.As(err, &recHdr) {
		step := StepStartTLS
		if implicit {
			step = StepDial
		}
		return &Error{Step: step, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return &Error{Step: StepConnect, Temporary: true, Err: err}
	}
	return &Error{Step: StepConnect, Temporary: replyTemporary(err), Err: err}
}

// classifySend names the step of a failed transaction from go-mail's
// SendError.
func classifySend(err error) error {
	var se *gomail.SendError
	if !errors.As(err, &se) {
		return &Error{Step: StepData, Temporary: replyTemporary(err), Err: err}
	}
	step := StepData
	switch se.Reason {
	case gomail.ErrSMTPMailFrom, gomail.ErrGetSender:
		step = StepSender
	case gomail.ErrSMTPRcptTo, gomail.ErrGetRcpts:
		step = StepRecipient
	case gomail.ErrConnCheck:
		step = StepConnect
	}
	temp := se.IsTemp()
	if code := se.ErrorCode(); code >= 400 && code < 500 {
		temp = true
	} else if code == 0 && (se.Reason == gomail.ErrConnCheck || se.Reason == gomail.ErrWriteContent) {
		temp = true // the connection broke: nothing was refused
	}
	return &Error{Step: step, Temporary: temp, Err: err}
}

// replyTemporary reports whether err carries a 4xx SMTP reply.
func replyTemporary(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		s := e.Error()
		if len(s) >= 3 && s[0] == '4' && s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9' {
			return true
		}
	}
	return false
}

// Outbox appends each message to a file, one JSON object a line, for
// tests, dry runs and `make run`:
//
//	{"to":"…","kind":"password_reset","subject":"…","text":"…","html":"…","link":"https://…","locale":"en","sent_at":"2026-…Z"}
//
// "html" is left out when the message has no HTML part; the other keys
// are always there ("link" is "" for a notice).
type Outbox struct {
	path string
	mu   sync.Mutex
	now  func() time.Time
}

// NewOutbox returns the outbox at path (created 0600 on the first send).
func NewOutbox(path string) *Outbox { return &Outbox{path: path, now: time.Now} }

// Path is the file the outbox appends to.
func (o *Outbox) Path() string { return o.path }

// OutboxLine is one line of the outbox file.
type OutboxLine struct {
	To      string    `json:"to"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	Text    string    `json:"text"`
	HTML    string    `json:"html,omitempty"`
	Link    string    `json:"link"`
	Locale  string    `json:"locale"`
	SentAt  time.Time `json:"sent_at"`
}

// Send appends m and syncs the file before it returns. A file that cannot
// be written is a temporary failure (a full disk, a missing directory an
// operator may yet create).
func (o *Outbox) Send(_ context.Context, m Message) error {
	if err := m.check(); err != nil {
		return &Error{Step: StepMessage, Err: err}
	}
	line, err := json.Marshal(OutboxLine{To: m.To, Kind: m.Kind, Subject: m.Subject, Text: m.Text, HTML: m.HTML,
		Link: m.Link, Locale: m.Locale, SentAt: o.now().UTC()})
	if err != nil {
		return &Error{Step: StepMessage, Err: err}
	}
	line = append(line, '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := appendSync(o.path, line); err != nil {
		return &Error{Step: StepOutbox, Temporary: true, Err: err}
	}
	return nil
}

// appendSync appends line to path in one write (O_APPEND: several
// processes appending to one file do not interleave their lines) and
// syncs it.
func appendSync(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
