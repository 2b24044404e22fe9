// Package smtptest runs a small ESMTP server in the test process on
// 127.0.0.1 for the mail tests: its own generated CA and a server
// certificate for 127.0.0.1 and localhost, a submission listener that
// offers STARTTLS (or, with NoStartTLS, does not) and an implicit-TLS
// listener, optional AUTH PLAIN (only after TLS), and every recipient
// accepted. Received messages are parsed with net/mail and mime/multipart
// so a test reads To, Subject and the text and HTML parts.
//
// It is in process rather than a system mail daemon because Debian 12's
// OpenSMTPD (6.8.0p2 against OpenSSL 3) fails every TLS handshake
// ("missing private key" in its privilege-separated signer), so it cannot
// stand for a relay that requires STARTTLS.
package smtptest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options shape the server.
type Options struct {
	// Username and Password, when set, make AUTH PLAIN required before
	// MAIL FROM (and offered only once the connection is encrypted).
	Username, Password string
	// NoStartTLS leaves STARTTLS out of the EHLO answer.
	NoStartTLS bool
	// RejectRcpt answers RCPT TO for this address with RejectCode.
	RejectRcpt string
	RejectCode int
}

// Message is a received message.
type Message struct {
	From     string   // envelope MAIL FROM
	Rcpt     []string // envelope RCPT TO
	Raw      []byte
	Header   mail.Header
	Subject  string // decoded
	To       string
	Text     string // decoded text/plain part
	HTML     string // decoded text/html part
	TLS      bool   // the session was encrypted
	AuthUser string
}

// Server is a running test server.
type Server struct {
	t         testing.TB
	opts      Options
	tlsConfig *tls.Config
	plain     net.Listener
	implicit  net.Listener
	// CAPEM is the PEM of the CA that signed the server's certificate;
	// CAFile is the same written to a file.
	CAPEM  string
	CAFile string

	mu       sync.Mutex
	received []Message
	arrived  chan struct{}
	wg       sync.WaitGroup
}

// Start starts the server and stops it at the end of the test.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts, arrived: make(chan struct{}, 64)}
	s.makeTLS(t.TempDir())
	var err error
	if s.plain, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if s.implicit, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(2)
	go s.accept(s.plain, false)
	go s.accept(s.implicit, true)
	t.Cleanup(func() {
		s.plain.Close()
		s.implicit.Close()
		s.wg.Wait()
	})
	return s
}

// Addr is the STARTTLS listener's host:port, SMTPSAddr the implicit one.
func (s *Server) Addr() string      { return s.plain.Addr().String() }
func (s *Server) SMTPSAddr() string { return s.implicit.Addr().String() }

// URL is smtp://[user:pass@]127.0.0.1:port; SMTPSURL the smtps:// one.
func (s *Server) URL() string      { return "smtp://" + s.userinfo() + s.Addr() }
func (s *Server) SMTPSURL() string { return "smtps://" + s.userinfo() + s.SMTPSAddr() }

func (s *Server) userinfo() string {
	if s.opts.Username == "" {
		return ""
	}
	return s.opts.Username + ":" + s.opts.Password + "@"
}

// Messages waits until at least n messages have arrived (failing the
// test after timeout) and returns all of them.
func (s *Server) Messages(n int, timeout time.Duration) []Message {
	s.t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		if len(s.received) >= n {
			out := append([]Message(nil), s.received...)
			s.mu.Unlock()
			return out
		}
		s.mu.Unlock()
		select {
		case <-s.arrived:
		case <-deadline:
			s.t.Fatalf("smtptest: %d messages after %v, want %d", s.Count(), timeout, n)
		}
	}
}

// Count is how many messages have arrived.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.received)
}

func (s *Server) accept(l net.Listener, implicit bool) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if implicit {
				tc := tls.Server(c, s.tlsConfig)
				if err := tc.Handshake(); err != nil {
					return
				}
				s.session(tc, true)
				return
			}
			s.session(c, false)
		}()
	}
}

// session speaks just enough ESMTP (RFC 5321, 3207, 4954) for a client.
func (s *Server) session(c net.Conn, encrypted bool) {
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	reply := func(format string, args ...any) {
		fmt.Fprintf(w, format+"\r\n", args...)
		w.Flush()
	}
	reply("220 localhost ESMTP smtptest")
	var (
		from, authUser string
		rcpt           []string
	)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			from, rcpt = "", nil
			ext := []string{"250-localhost", "250-8BITMIME", "250-SIZE 10485760"}
			if !encrypted && !s.opts.NoStartTLS {
				ext = append(ext, "250-STARTTLS")
			}
			if encrypted && s.opts.Username != "" {
				ext = append(ext, "250-AUTH PLAIN")
			}
			ext = append(ext, "250 ENHANCEDSTATUSCODES")
			for _, e := range ext {
				fmt.Fprintf(w, "%s\r\n", e)
			}
			w.Flush()
		case "STARTTLS":
			if encrypted || s.opts.NoStartTLS {
				reply("502 5.5.1 not here")
				continue
			}
			reply("220 2.0.0 ready to start TLS")
			tc := tls.Server(c, s.tlsConfig)
			if err := tc.Handshake(); err != nil {
				return
			}
			c, encrypted = tc, true
			r, w = bufio.NewReader(tc), bufio.NewWriter(tc)
			from, rcpt, authUser = "", nil, ""
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			if !encrypted || s.opts.Username == "" || !strings.EqualFold(mech, "PLAIN") {
				reply("504 5.5.4 mechanism not available")
				continue
			}
			if resp == "" {
				reply("334 ")
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				resp = strings.TrimSpace(l)
			}
			dec, err := base64.StdEncoding.DecodeString(resp)
			parts := strings.Split(string(dec), "\x00")
			if err != nil || len(parts) != 3 || parts[1] != s.opts.Username || parts[2] != s.opts.Password {
				reply("535 5.7.8 authentication failed")
				continue
			}
			authUser = parts[1]
			reply("235 2.7.0 authenticated")
		case "MAIL":
			if s.opts.Username != "" && authUser == "" {
				reply("530 5.7.0 authentication required")
				continue
			}
			from, rcpt = addrArg(arg), nil
			reply("250 2.1.0 ok")
		case "RCPT":
			if from == "" {
				reply("503 5.5.1 MAIL first")
				continue
			}
			to := addrArg(arg)
			if s.opts.RejectRcpt != "" && strings.EqualFold(to, s.opts.RejectRcpt) {
				code := s.opts.RejectCode
				if code == 0 {
					code = 550
				}
				reply("%d %d.1.1 recipient refused", code, code/100)
				continue
			}
			rcpt = append(rcpt, to)
			reply("250 2.1.5 ok")
		case "DATA":
			if len(rcpt) == 0 {
				reply("503 5.5.1 RCPT first")
				continue
			}
			reply("354 end with <CRLF>.<CRLF>")
			var raw bytes.Buffer
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" || l == ".\n" {
					break
				}
				raw.WriteString(strings.TrimPrefix(l, "."))
			}
			m := Message{From: from, Rcpt: rcpt, Raw: raw.Bytes(), TLS: encrypted, AuthUser: authUser}
			if err := parse(&m); err != nil {
				s.t.Errorf("smtptest: received message does not parse: %v\n%s", err, raw.Bytes())
			}
			s.mu.Lock()
			s.received = append(s.received, m)
			s.mu.Unlock()
			select {
			case s.arrived <- struct{}{}:
			default:
			}
			from, rcpt = "", nil
			reply("250 2.0.0 queued")
		case "RSET":
			from, rcpt = "", nil
			reply("250 2.0.0 ok")
		case "NOOP":
			reply("250 2.0.0 ok")
		case "QUIT":
			reply("221 2.0.0 bye")
			return
		default:
			reply("500 5.5.2 unknown command")
		}
	}
}

// addrArg takes the address out of "FROM:<a@b> SIZE=..." or "TO:<a@b>".
func addrArg(arg string) string {
	if i := strings.IndexByte(arg, '<'); i >= 0 {
		if j := strings.IndexByte(arg[i:], '>'); j > 0 {
			return arg[i+1 : i+j]
		}
	}
	return ""
}

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
// localhost, and writes the CA to dir/ca.pem.
func (s *Server) makeTLS(dir string) {
	s.t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtptest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		s.t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.CAPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	s.CAFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(s.CAFile, []byte(s.CAPEM), 0o600); err != nil {
		s.t.Fatal(err)
	}
}
