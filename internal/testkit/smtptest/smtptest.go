// Package smtptest runs a private Exim (Debian's exim4-daemon-light, the
// GnuTLS build) per test on 127.0.0.1 for the mail tests: a config
// generated in the test's temporary directory with its own spool, logs
// and pid file, its own generated CA and a server certificate for
// 127.0.0.1 and localhost, a submission port that offers STARTTLS (or,
// with NoStartTLS, does not) and an implicit-TLS port, optional AUTH PLAIN
// (offered only once the connection is encrypted, then required before
// MAIL FROM), and every recipient accepted and delivered to a maildir
// in the temporary directory, unless refused with RejectRcpt. Delivered
// messages are parsed with net/mail and mime/multipart so a test reads To,
// Subject and the text and HTML parts; the envelope, TLS and
// authentication of the session come from X-Smtptest-* headers exim adds
// in its DATA ACL.
//
// Without exim the test is skipped, or fails when CI is "true"
// (scripts/ensure-smtp.sh installs it). Exim rather than OpenSMTPD:
// Debian 12's OpenSMTPD (6.8.0p2 against OpenSSL 3) fails every TLS
// handshake ("missing private key" in its privilege-separated signer,
// OpenSMTPD issues 1171 and 1239).
package smtptest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/testkit/freeport"
	"github.com/oidcd/oidcd/internal/testkit/testca"
)

// Path is the exim binary the kit runs.
var Path = "/usr/sbin/exim4"

// Options shape the server.
type Options struct {
	// Username and Password, when set, make AUTH PLAIN required before
	// MAIL FROM (and offered only once the connection is encrypted).
	Username, Password string
	// NoStartTLS leaves STARTTLS out of the EHLO answer.
	NoStartTLS bool
	// RejectRcpt answers RCPT TO for this address with RejectCode (550
	// when zero; a 4xx code defers, a 5xx code denies).
	RejectRcpt string
	RejectCode int
}

// Message is a received message.
type Message struct {
	From     string   // envelope MAIL FROM
	Rcpt     []string // envelope RCPT TO
	Raw      []byte   // as delivered, with exim's Received and X-Smtptest-* headers
	Header   mail.Header
	Subject  string // decoded
	To       string
	Text     string // decoded text/plain part
	HTML     string // decoded text/html part
	TLS      bool   // the session was encrypted
	AuthUser string
}

// Server is a running exim.
type Server struct {
	t         testing.TB
	opts      Options
	dir       string
	port      int // STARTTLS (or plain) submission port
	smtpsPort int // implicit TLS
	certFile  string
	keyFile   string
	cmd       *exec.Cmd
	exited    chan struct{}
	// CAPEM is the PEM of the CA that signed the server's certificate;
	// CAFile is the same written to a file.
	CAPEM  string
	CAFile string
}

// Start starts exim and stops it at the end of the test.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("exim not found at %s (run scripts/ensure-smtp.sh)", Path)
		}
		t.Skipf("exim not found at %s; run scripts/ensure-smtp.sh", Path)
	}
	s := &Server{t: t, opts: opts, dir: t.TempDir(), exited: make(chan struct{})}
	uid, gid, name, group := s.runAs()
	s.makeTLS(s.dir)
	for _, d := range []string{"spool", "log", "maildir"} {
		p := filepath.Join(s.dir, d)
		if err := os.Mkdir(p, 0o750); err != nil {
			t.Fatal(err)
		}
		s.chown(p, uid, gid)
	}
	s.chown(s.keyFile, uid, gid)
	s.port, s.smtpsPort = freeport.TCP(t), freeport.TCP(t)
	conf := filepath.Join(s.dir, "exim.conf")
	if err := os.WriteFile(conf, []byte(s.config(name, group)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(Path, "-C", conf, "-bdf")
	var out bytes.Buffer
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("smtptest: starting exim: %v", err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		// The daemon and any delivery it forked share its process group.
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
		if t.Failed() {
			s.dumpLogs()
		}
	})
	if err := s.waitReady(10 * time.Second); err != nil {
		s.dumpLogs()
		t.Fatalf("smtptest: exim did not start: %v\n%s", err, out.String())
	}
	return s
}

// runAs is the user exim runs as and delivers as: Debian-exim under root
// (exim never delivers as root), otherwise the caller (exim gives up its
// privilege for a -C config, so it runs as whoever started it).
func (s *Server) runAs() (uid, gid int, name, group string) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			s.t.Fatal(err)
		}
		g, err := user.LookupGroupId(u.Gid)
		if err != nil {
			s.t.Fatal(err)
		}
		return -1, -1, u.Username, g.Name
	}
	u, err := user.Lookup("Debian-exim")
	if err != nil {
		s.t.Fatalf("smtptest: %v (is exim4 installed?)", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	// The test's temporary directories are 0700 and root's: let the
	// exim user reach its spool, logs, maildir and key.
	for d := s.dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			s.t.Fatal(err)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return uid, gid, u.Username, u.Username
}

func (s *Server) chown(path string, uid, gid int) {
	if uid < 0 {
		return
	}
	if err := os.Chown(path, uid, gid); err != nil {
		s.t.Fatal(err)
	}
}

// quote escapes s for use as literal text inside an exim string expansion.
func quote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\${}`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// config is the exim configuration for s, running as user and group.
func (s *Server) config(user, group string) string {
	var c strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&c, format+"\n", args...) }
	p("primary_hostname = localhost")
	p("exim_user = %s", user)
	p("exim_group = %s", group)
	p("never_users =")
	p("keep_environment =")
	p("spool_directory = %s", filepath.Join(s.dir, "spool"))
	p("log_file_path = %s", filepath.Join(s.dir, "log", "%slog"))
	p("pid_file_path = %s", filepath.Join(s.dir, "exim.pid"))
	p("local_interfaces = 127.0.0.1")
	p("daemon_smtp_ports = %d : %d", s.port, s.smtpsPort)
	p("tls_on_connect_ports = %d", s.smtpsPort)
	p("tls_certificate = %s", s.certFile)
	p("tls_privatekey = %s", s.keyFile)
	if s.opts.NoStartTLS {
		p("tls_advertise_hosts =")
	} else {
		p("tls_advertise_hosts = *")
	}
	p("host_lookup =")
	p("rfc1413_hosts =")
	p("rfc1413_query_timeout = 0s")
	p("log_selector = +smtp_protocol_error +smtp_syntax_error +tls_peerdn")
	p("acl_smtp_mail = acl_mail")
	p("acl_smtp_rcpt = acl_rcpt")
	p("acl_smtp_data = acl_data")
	p("")
	p("begin acl")
	p("acl_mail:")
	if s.opts.Username != "" {
		p("  deny !authenticated = *")
		p("       message = 530 5.7.0 authentication required")
	}
	p("  accept")
	p("acl_rcpt:")
	if s.opts.RejectRcpt != "" {
		code := s.opts.RejectCode
		if code == 0 {
			code = 550
		}
		verb := "deny"
		if code/100 == 4 {
			verb = "defer"
		}
		p("  %s recipients = %s", verb, quote(s.opts.RejectRcpt))
		p("       message = %d %d.1.1 recipient refused", code, code/100)
	}
	p("  accept")
	p("acl_data:")
	p("  warn add_header = X-Smtptest-From: <$sender_address>\\n\\")
	p("                    X-Smtptest-Rcpt: $recipients\\n\\")
	p("                    X-Smtptest-TLS: $tls_in_cipher\\n\\")
	p("                    X-Smtptest-Auth: $authenticated_id")
	p("  accept")
	p("")
	p("begin routers")
	p("all:")
	p("  driver = accept")
	p("  transport = maildir")
	p("")
	p("begin transports")
	p("maildir:")
	p("  driver = appendfile")
	p("  directory = %s", filepath.Join(s.dir, "maildir"))
	p("  maildir_format")
	p("  use_crlf")
	p("  batch_max = 1000")
	p("  user = %s", user)
	p("  group = %s", group)
	p("  mode = 0644")
	p("")
	p("begin authenticators")
	if s.opts.Username != "" {
		p("plain:")
		p("  driver = plaintext")
		p("  public_name = PLAIN")
		p("  server_prompts = :")
		p("  server_condition = ${if and {{eq{$auth2}{%s}}{eq{$auth3}{%s}}}}", quote(s.opts.Username), quote(s.opts.Password))
		p("  server_set_id = $auth2")
		p("  server_advertise_condition = ${if def:tls_in_cipher}")
	}
	return c.String()
}

// waitReady waits until both ports accept connections.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, port := range []int{s.port, s.smtpsPort} {
		for {
			select {
			case <-s.exited:
				return fmt.Errorf("exim exited: %v", s.cmd.ProcessState)
			default:
			}
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// dumpLogs logs exim's main, reject and panic logs.
func (s *Server) dumpLogs() {
	for _, name := range []string{"mainlog", "rejectlog", "paniclog"} {
		b, err := os.ReadFile(filepath.Join(s.dir, "log", name))
		if err == nil && len(b) > 0 {
			s.t.Logf("smtptest: exim %s:\n%s", name, b)
		}
	}
}

// Addr is the STARTTLS listener's host:port, SMTPSAddr the implicit one.
func (s *Server) Addr() string      { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }
func (s *Server) SMTPSAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.smtpsPort)) }

// URL is smtp://[user:pass@]127.0.0.1:port; SMTPSURL the smtps:// one.
func (s *Server) URL() string      { return "smtp://" + s.userinfo() + s.Addr() }
func (s *Server) SMTPSURL() string { return "smtps://" + s.userinfo() + s.SMTPSAddr() }

func (s *Server) userinfo() string {
	if s.opts.Username == "" {
		return ""
	}
	return s.opts.Username + ":" + s.opts.Password + "@"
}

// delivered lists the delivered message files, oldest first.
func (s *Server) delivered() []string {
	files, err := os.ReadDir(filepath.Join(s.dir, "maildir", "new"))
	if err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if !f.IsDir() {
			names = append(names, f.Name())
		}
	}
	// Exim's maildir names begin with the delivery time in seconds, so
	// the order of the names is the order of delivery (to the second).
	sort.Strings(names)
	return names
}

// Messages waits until at least n messages have been delivered (failing
// the test after timeout) and returns all of them.
func (s *Server) Messages(n int, timeout time.Duration) []Message {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		names := s.delivered()
		if len(names) >= n {
			out := make([]Message, 0, len(names))
			for _, name := range names {
				raw, err := os.ReadFile(filepath.Join(s.dir, "maildir", "new", name))
				if err != nil {
					s.t.Fatal(err)
				}
				m := Message{Raw: raw}
				if err := parse(&m); err != nil {
					s.t.Errorf("smtptest: delivered message does not parse: %v\n%s", err, raw)
				}
				out = append(out, m)
			}
			return out
		}
		if time.Now().After(deadline) {
			s.dumpLogs()
			s.t.Fatalf("smtptest: %d messages after %v, want %d", len(names), timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Count is how many messages have been delivered.
func (s *Server) Count() int { return len(s.delivered()) }

// parse reads the headers and the text and HTML parts of m.Raw.
func parse(m *Message) error {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Raw))
	if err != nil {
		return err
	}
	m.Header = msg.Header
	dec := new(mime.WordDecoder)
	if m.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return fmt.Errorf("subject: %w", err)
	}
	m.To = msg.Header.Get("To")
	m.From = strings.Trim(msg.Header.Get("X-Smtptest-From"), "<>")
	for _, r := range strings.Split(msg.Header.Get("X-Smtptest-Rcpt"), ",") {
		if r = strings.TrimSpace(r); r != "" {
			m.Rcpt = append(m.Rcpt, r)
		}
	}
	m.TLS = msg.Header.Get("X-Smtptest-TLS") != ""
	m.AuthUser = msg.Header.Get("X-Smtptest-Auth")
	return part(m, msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
}

func part(m *Message, contentType, encoding string, body io.Reader) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("content type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := part(m, p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); err != nil {
				return err
			}
		}
	}
	switch strings.ToLower(encoding) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("%s part: %w", mt, err)
	}
	switch mt {
	case "text/plain":
		m.Text = string(b)
	case "text/html":
		m.HTML = string(b)
	}
	return nil
}

// makeTLS generates a CA and a server certificate for 127.0.0.1 and
// localhost (testca), writes the pair for exim and the CA to dir/ca.pem.
func (s *Server) makeTLS(dir string) {
	s.t.Helper()
	ca := testca.New(s.t, "smtptest CA")
	s.certFile = filepath.Join(dir, "cert.pem")
	s.keyFile = filepath.Join(dir, "key.pem")
	s.CAPEM = string(ca.CAPEM)
	s.CAFile = filepath.Join(dir, "ca.pem")
	for name, file := range map[string]struct {
		body []byte
		mode os.FileMode
	}{s.certFile: {ca.CertPEM, 0o644}, s.keyFile: {ca.KeyPEM, 0o600}, s.CAFile: {ca.CAPEM, 0o644}} {
		if err := os.WriteFile(name, file.body, file.mode); err != nil {
			s.t.Fatal(err)
		}
	}
}
