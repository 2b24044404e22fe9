package node_test

// The people's own way in, end to end (docs/operators/self-service.md,
// invitations.md, email.md): real nodes through testcluster, every step
// through the real pages in a cookie-keeping browser, relying parties
// built with go-oidc and x/oauth2, and mail through the nodes' own
// delivery: the outbox file the nodes share, or a real Exim reached with
// STARTTLS under its own CA (skipped without Exim unless CI=true).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/testkit/smtptest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// ---- mail as a person's mailbox shows it ----

// mailOut is one delivered message.
type mailOut struct {
	To, Kind, Subject, Text, HTML, Link string
}

// postman hands a test the messages the nodes delivered, each link once
// (delivery is at least once: a second copy carries the same link), and
// remembers every token it saw for the scans of logs and audit.
type postman struct {
	issuer string
	read   func(t *testing.T) []mailOut
	mu     sync.Mutex
	taken  map[string]bool
	toks   []string
}

func newPostman(issuer string, read func(t *testing.T) []mailOut) *postman {
	return &postman{issuer: issuer, read: read, taken: map[string]bool{}}
}

// await waits up to 30 s for a message of kind to the address to whose
// link was not handed out yet.
func (p *postman) await(t *testing.T, to, kind string) mailOut {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range p.read(t) {
			if m.To != to || m.Kind != kind {
				continue
			}
			p.mu.Lock()
			seen := p.taken[m.Link]
			p.taken[m.Link] = true
			if !seen && m.Link != "" {
				p.toks = append(p.toks, linkToken(t, m.Link))
			}
			p.mu.Unlock()
			if !seen {
				if m.Link != "" && !strings.Contains(m.Text, m.Link) {
					t.Errorf("%s message to %s: its text lacks its link %s", kind, to, m.Link)
				}
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s message to %s within 30 s", kind, to)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// none fails the test if any message went to the address.
func (p *postman) none(t *testing.T, to string) {
	t.Helper()
	for _, m := range p.read(t) {
		if m.To == to {
			t.Errorf("a %s message went to %s", m.Kind, to)
		}
	}
}

func (p *postman) tokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.toks)
}

// linkToken is the token of a link: its last path segment, 43 characters
// of base64url (256 bits).
func linkToken(t *testing.T, link string) string {
	t.Helper()
	tok := link[strings.LastIndexByte(link, '/')+1:]
	if b, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(b) != 32 {
		t.Fatalf("link %s: the token is not 256 bits of base64url", link)
	}
	return tok
}

// outboxMail reads the outbox file the nodes share, a JSON object a line
// with every key docs/operators/email.md lists.
func outboxMail(path string) func(t *testing.T) []mailOut {
	return func(t *testing.T) []mailOut {
		t.Helper()
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		var out []mailOut
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &keys); err != nil {
				t.Fatalf("outbox line %q: %v", sc.Text(), err)
			}
			for _, k := range []string{"to", "kind", "subject", "text", "link", "locale", "sent_at"} {
				if _, ok := keys[k]; !ok {
					t.Fatalf("outbox line without %q: %s", k, sc.Text())
				}
			}
			var l struct {
				To, Kind, Subject, Text, HTML, Link, Locale string
				SentAt                                      time.Time `json:"sent_at"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Locale != "en" || l.SentAt.IsZero() {
				t.Fatalf("outbox line %s: %v", sc.Text(), err)
			}
			out = append(out, mailOut{To: l.To, Kind: l.Kind, Subject: l.Subject, Text: l.Text, HTML: l.HTML, Link: l.Link})
		}
		return out
	}
}

// linkKinds names a message by the path of the link it carries.
var linkKinds = map[string]string{"password/reset": "password_reset", "verify-email": "verify_email", "invite": "invitation", "register": "registration"}

// eximMail reads what Exim delivered to its maildir: each message parsed
// here with net/mail and mime/multipart, its link found in the text part.
// Every message must have come through TLS with the relay's login, as
// multipart/alternative with a text and an HTML part.
func eximMail(srv *smtptest.Server, issuer string) func(t *testing.T) []mailOut {
	re := regexp.MustCompile(regexp.QuoteMeta(issuer) + `/(password/reset|verify-email|invite|register)/[A-Za-z0-9_-]{43}`)
	return func(t *testing.T) []mailOut {
		t.Helper()
		var out []mailOut
		for _, m := range srv.Messages(0, time.Second) {
			if !m.TLS || m.AuthUser != "oidcd" || len(m.Rcpt) != 1 {
				t.Fatalf("delivered: TLS %v, login %q, recipients %q", m.TLS, m.AuthUser, m.Rcpt)
			}
			subject, text, htm, err := mimeParts(m.Raw)
			if err != nil {
				t.Fatalf("message to %s: %v\n%s", m.Rcpt[0], err, m.Raw)
			}
			o := mailOut{To: m.Rcpt[0], Subject: subject, Text: text, HTML: htm}
			if sub := re.FindStringSubmatch(text); sub != nil {
				o.Link, o.Kind = sub[0], linkKinds[sub[1]]
				if !strings.Contains(htm, o.Link) {
					t.Errorf("message to %s: the HTML part lacks the link", o.To)
				}
			}
			out = append(out, o)
		}
		return out
	}
}

// mimeParts reads a message's subject and its text and HTML parts.
func mimeParts(raw []byte) (subject, text, htm string, err error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return "", "", "", err
	}
	if subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return "", "", "", err
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		return "", "", "", fmt.Errorf("Content-Type %q, want multipart/alternative", msg.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // undoes quoted-printable itself
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", "", "", err
		}
		var body io.Reader = part
		if strings.EqualFold(part.Header.Get("Content-Transfer-Encoding"), "base64") {
			body = base64.NewDecoder(base64.StdEncoding, part)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			return "", "", "", err
		}
		ct, ps, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if !strings.EqualFold(ps["charset"], "utf-8") {
			return "", "", "", fmt.Errorf("part %s in charset %q", ct, ps["charset"])
		}
		switch ct {
		case "text/plain":
			text = string(b)
		case "text/html":
			htm = string(b)
		}
	}
	if text == "" || htm == "" {
		return "", "", "", fmt.Errorf("text part %d bytes, HTML part %d bytes", len(text), len(htm))
	}
	return subject, text, htm, nil
}

// ---- the nodes' logs ----

// logSink collects every node's log lines, at debug level, to look for
// tokens in them.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *logSink) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
func (s *logSink) logger(i int) *slog.Logger {
	return slog.New(slog.NewTextHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug})).With("n", i)
}

// checkNoTokens fails the test if any token is in the nodes' logs or
// node i's audit trail (GET /admin/v1/audit), or the hash of a token is
// in the trail.
func checkNoTokens(t *testing.T, c *testcluster.Cluster, logs *logSink, tokens []string, i int) []auditEvent {
	t.Helper()
	out := logs.String()
	if !strings.Contains(out, `msg="password reset"`) {
		t.Fatalf("the captured logs (%d bytes) hold no reset: the capture does not work", len(out))
	}
	events, raw := auditOn(t, c, i)
	for _, tok := range tokens {
		if strings.Contains(out, tok) {
			t.Errorf("a token is in the nodes' logs: %s", contextOf(out, tok))
		}
		if bytes.Contains(raw, []byte(tok)) || bytes.Contains(raw, []byte(email.HashToken(tok))) {
			t.Errorf("a token or its hash is in the audit trail")
		}
	}
	t.Logf("%d tokens looked for in %d bytes of log and %d audit events", len(tokens), len(out), len(events))
	return events
}

func contextOf(s, sub string) string {
	i := strings.Index(s, sub)
	start, end := max(0, strings.LastIndexByte(s[:i], '\n')+1), i+len(sub)
	if j := strings.IndexByte(s[end:], '\n'); j >= 0 {
		end += j
	}
	return s[start:end]
}

// ---- people, pages and relying parties ----

// newPerson creates a local person with a password, a member of orgs.
func newPerson(t *testing.T, c *testcluster.Cluster, addr, pw string, verified bool, orgs ...string) string {
	t.Helper()
	var u map[string]any
	if r := do(t, c, "POST", "/admin/v1/users", testcluster.AdminToken, map[string]any{"email": addr, "email_verified": verified, "password": pw}, &u); r.StatusCode != 201 {
		t.Fatalf("create %s: %d", addr, r.StatusCode)
	}
	for _, org := range orgs {
		if r := do(t, c, "POST", "/admin/v1/memberships", testcluster.AdminToken, map[string]any{"user_id": u["id"], "org_id": org}, nil); r.StatusCode != 201 {
			t.Fatalf("membership of %s: %d", addr, r.StatusCode)
		}
	}
	return u["id"].(string)
}

// newApp registers a client of org; secret is "" for a public one.
func newApp(t *testing.T, c *testcluster.Cluster, org, name string, public bool, cb string) (id, secret string) {
	t.Helper()
	body := map[string]any{"name": name, "redirect_uris": []string{cb}, "scopes": []string{"openid", "email"},
		"organization_id": org, "skip_consent": true}
	if public {
		body["type"] = "public"
	}
	var cl map[string]any
	if r := do(t, c, "POST", "/admin/v1/clients", testcluster.AdminToken, body, &cl); r.StatusCode != 201 {
		t.Fatalf("client %s: %d", name, r.StatusCode)
	}
	secret, _ = cl["client_secret"].(string)
	return cl["client_id"].(string), secret
}

func newOrg(t *testing.T, c *testcluster.Cluster, slug, name string) string {
	t.Helper()
	var o map[string]any
	if r := do(t, c, "POST", "/admin/v1/organizations", testcluster.AdminToken, map[string]any{"slug": slug, "name": name}, &o); r.StatusCode != 201 {
		t.Fatalf("organization %s: %d", slug, r.StatusCode)
	}
	return o["id"].(string)
}

// onNode is link (under the issuer, the balancer) on node i.
func onNode(c *testcluster.Cluster, i int, link string) string {
	return c.URL(i) + strings.TrimPrefix(link, c.Issuer())
}

// checkTokenPage checks what docs/operators/self-service.md promises of a
// page whose URL holds a token: no Referer leaves it, no cache keeps it,
// and the token is nowhere in it (its form carries the hash, sealed).
func checkTokenPage(t *testing.T, p *testcluster.Page, token string) {
	t.Helper()
	if p.Header.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(p.Header.Get("Cache-Control"), "no-store") {
		t.Errorf("a link's page (%d): Referrer-Policy %q, Cache-Control %q", p.Status, p.Header.Get("Referrer-Policy"), p.Header.Get("Cache-Control"))
	}
	if strings.Contains(p.Body, token) {
		t.Errorf("the page of a link holds its token")
	}
}

// hrefOf is where the page's link with text leads.
func hrefOf(t *testing.T, p *testcluster.Page, text string) string {
	t.Helper()
	m := regexp.MustCompile(`<a href="([^"]*)">` + regexp.QuoteMeta(text) + `</a>`).FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("%s has no link %q:\n%s", p.URL, text, p.Body)
	}
	u, err := p.URL.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return u.String()
}

func wantPage(t *testing.T, p *testcluster.Page, status int, text string) {
	t.Helper()
	if p.Status != status || !strings.Contains(html.UnescapeString(p.Body), text) {
		t.Fatalf("%s: got %d, want %d with %q:\n%s", p.URL, p.Status, status, text, p.Body)
	}
}

// signInAs is how a scripted person answers the sign-in pages.
type signInAs struct {
	email, password string
	totp, recovery  string // the second-factor page's answer: a code of this TOTP secret, or this recovery code
}

// signInFlow drives b through r's authorization request and returns the
// callback's query and whether a second factor was asked for.
func signInFlow(t *testing.T, b *testcluster.Browser, r *rp, as signInAs, pkce, nonce string, extra ...oauth2.AuthCodeOption) (url.Values, bool) {
	t.Helper()
	const state = "state-selfservice-0123"
	base := r.authBase()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(pkce), gooidc.Nonce(nonce)}, extra...)
	page := b.Follow(b.Get(r.oauth.AuthCodeURL(state, opts...)), base)
	asked := false
	for i := 0; i < 5 && page.Location() == ""; i++ {
		switch {
		case strings.Contains(page.Body, `value="otp"`) || strings.Contains(page.Body, `value="recovery"`):
			asked = true
			switch {
			case as.totp != "":
				code, err := factor.TOTPCode(as.totp, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				page = b.Submit(page, map[string]string{"code": code}, "method", "otp")
			case as.recovery != "":
				page = b.Submit(page, map[string]string{"code": as.recovery}, "method", "recovery")
			default:
				t.Fatalf("asked for a second factor %s has none of", as.email)
			}
		case strings.Contains(page.Body, `name="password"`):
			page = b.Submit(page, map[string]string{"email": as.email, "password": as.password}, "method", "password")
		case strings.Contains(page.Body, `value="allow"`):
			page = b.Submit(page, nil, "decision", "allow")
		default:
			t.Fatalf("unexpected page %d at %s:\n%s", page.Status, page.URL, page.Body)
		}
		page = b.Follow(page, base)
	}
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), r.oauth.RedirectURL) || loc.Query().Get("state") != state {
		t.Fatalf("sign-in of %s ended at %d %q:\n%s", as.email, page.Status, page.Location(), page.Body)
	}
	return loc.Query(), asked
}

// selfClaims are the ID-token claims these tests look at.
type selfClaims struct {
	Sub   string   `json:"sub"`
	SID   string   `json:"sid"`
	Org   string   `json:"organization_id"`
	Nonce string   `json:"nonce"`
	AMR   []string `json:"amr"`
	ACR   string   `json:"acr"`
}

// exchangeCode redeems the callback's code and verifies the ID token
// with go-oidc, nonce included.
func exchangeCode(t *testing.T, r *rp, q url.Values, pkce, nonce string) (*oauth2.Token, selfClaims) {
	t.Helper()
	ctx := gooidc.ClientContext(context.Background(), &http.Client{Transport: testcluster.LoopbackTransport(), Timeout: 10 * time.Second})
	tok, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := r.verifier.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("go-oidc rejected the ID token: %v", err)
	}
	var cl selfClaims
	if err := idt.Claims(&cl); err != nil || cl.Nonce != nonce || cl.Sub == "" || cl.SID == "" {
		t.Fatalf("ID token claims %+v (%v), want nonce %q", cl, err, nonce)
	}
	return tok, cl
}

// userinfoOn asks node i's userinfo with go-oidc's Provider.UserInfo.
func userinfoOn(t *testing.T, c *testcluster.Cluster, i int, tok *oauth2.Token) *gooidc.UserInfo {
	t.Helper()
	ctx := gooidc.ClientContext(context.Background(), c.Client())
	p := (&gooidc.ProviderConfig{IssuerURL: c.Issuer(), UserInfoURL: c.URL(i) + "/userinfo"}).NewProvider(ctx)
	ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		t.Fatalf("userinfo on node %d: %v", i, err)
	}
	return ui
}

// formFields blanks the values of the per-request fields of a page's
// forms (the CSRF token and the sealed step) so two pages compare.
var formFields = regexp.MustCompile(`(name="(?:csrf_token|step)" value=")[^"]*"`)

func withoutSealed(body string) string { return formFields.ReplaceAllString(body, `$1"`) }

// ---- the tests ----

// TestSelfServiceAcrossThreeNodes: three nodes share one outbox file and
// their logs are captured. A relying party sees email_verified change
// when an administrator's address check is followed; invitations create
// a new person or give an existing one a membership; registration goes
// on with the authorization request it started from; an attacker learns
// nothing from the forgotten-password page on any node, a link works
// once, and no token reaches a log line or the audit trail.
func TestSelfServiceAcrossThreeNodes(t *testing.T) {
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	logs := &logSink{}
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(i int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.EmailOutbox = outbox
		cfg.Logger = logs.logger(i)
	}})
	w := provision(t, c)
	pm := newPostman(c.Issuer(), outboxMail(outbox))
	ids := map[string]string{} // address -> person

	t.Run("RelyingPartySeesEmailVerifiedChange", func(t *testing.T) {
		const addr, pw = "vera@example.org", "vera's first password"
		ids[addr] = newPerson(t, c, addr, pw, false, w.orgA)
		r := rpOn(t, c, 0, 0, w.confID, w.confSecret, w.cb)
		b := testcluster.NewBrowser(t)
		pkce := oauth2.GenerateVerifier()
		q, _ := signInFlow(t, b, r, signInAs{email: addr, password: pw}, pkce, "nonce-vera-1")
		tok, first := exchangeCode(t, r, q, pkce, "nonce-vera-1")
		if ui := userinfoOn(t, c, 1, tok); ui.Email != addr || ui.EmailVerified {
			t.Fatalf("userinfo before the check: %q verified %v", ui.Email, ui.EmailVerified)
		}

		var sent struct {
			UserID    string    `json:"user_id"`
			Email     string    `json:"email"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		if resp := doOn(t, c, 0, "POST", "/admin/v1/users/"+ids[addr]+"/verify-email", testcluster.AdminToken, nil, &sent); resp.StatusCode != http.StatusAccepted ||
			sent.UserID != ids[addr] || sent.Email != addr || time.Until(sent.ExpiresAt) < 23*time.Hour || time.Until(sent.ExpiresAt) > 25*time.Hour {
			t.Fatalf("verify-email: %d %+v", resp.StatusCode, sent)
		}
		m := pm.await(t, addr, "verify_email")
		if !strings.HasPrefix(m.Link, c.Issuer()+"/verify-email/") || m.HTML == "" {
			t.Fatalf("verify_email message: link %q, HTML %d bytes", m.Link, len(m.HTML))
		}
		if st, err := os.Stat(outbox); err != nil {
			t.Error(err)
		} else if st.Mode().Perm() != 0o600 {
			t.Errorf("outbox file mode %v, want 0600", st.Mode().Perm())
		}

		// The link, in another browser, on node 2: a page, then the button.
		other := testcluster.NewBrowser(t)
		page := other.Get(onNode(c, 2, m.Link))
		wantPage(t, page, http.StatusOK, "Confirm that "+addr+" is your address.")
		checkTokenPage(t, page, linkToken(t, m.Link))
		done := other.Submit(page, nil, "", "")
		wantPage(t, done, http.StatusOK, "The address of your account is now "+addr)

		// The same access token, on node 1, at once.
		if ui := userinfoOn(t, c, 1, tok); ui.Email != addr || !ui.EmailVerified {
			t.Fatalf("userinfo right after the check, same token: %q verified %v", ui.Email, ui.EmailVerified)
		}
		// A new sign-in (silent: the SSO session lives) gives a new ID
		// token for the same person and app session, and an access token
		// whose userinfo says so too (email and email_verified are
		// userinfo's claims, not the ID token's: application-developers.md).
		r1 := rpOn(t, c, 1, 1, w.confID, w.confSecret, w.cb)
		pkce2 := oauth2.GenerateVerifier()
		q2, asked := signInFlow(t, b, r1, signInAs{}, pkce2, "nonce-vera-2", oauth2.SetAuthURLParam("prompt", "none"))
		tok2, second := exchangeCode(t, r1, q2, pkce2, "nonce-vera-2")
		if asked || second.Sub != first.Sub || second.SID != first.SID {
			t.Fatalf("silent sign-in: asked %v, claims %+v after %+v", asked, second, first)
		}
		if ui := userinfoOn(t, c, 2, tok2); !ui.EmailVerified {
			t.Fatal("userinfo with the new token: not verified")
		}
		// The link was used: a second follow shows the invalid-link page.
		wantPage(t, other.Get(onNode(c, 0, m.Link)), http.StatusGone, "This link does not work")
	})

	t.Run("Invitations", func(t *testing.T) {
		gamma := newOrg(t, c, "gamma", "Gamma")
		appID, _ := newApp(t, c, gamma, "Gamma App", true, w.cb)
		app := rpOn(t, c, 0, 1, appID, "", w.cb)

		// A new person.
		const nina, ninaPW = "nina@example.org", "nina chose this one"
		var inv map[string]any
		resp := doOn(t, c, 1, "POST", "/admin/v1/invitations", testcluster.AdminToken, map[string]any{"email": nina, "organization_id": gamma}, &inv)
		if resp.StatusCode != http.StatusCreated || inv["status"] != "pending" || inv["organization_id"] != gamma {
			t.Fatalf("invitation: %d %v", resp.StatusCode, inv)
		}
		if raw, _ := json.Marshal(inv); strings.Contains(string(raw), "/invite/") {
			t.Fatalf("the API's answer holds the link: %s", raw)
		}
		m := pm.await(t, nina, "invitation")
		if !strings.HasPrefix(m.Link, c.Issuer()+"/invite/") || !strings.Contains(m.Subject, "Gamma") {
			t.Fatalf("invitation message: %q %q", m.Subject, m.Link)
		}
		b := testcluster.NewBrowser(t)
		page := b.Get(onNode(c, 2, m.Link))
		wantPage(t, page, http.StatusOK, "You are invited to join Gamma.")
		checkTokenPage(t, page, linkToken(t, m.Link))
		wantPage(t, b.Submit(page, map[string]string{"new_password": ninaPW}, "", ""), http.StatusOK, "You are a member of Gamma.")

		pkce := oauth2.GenerateVerifier()
		q, _ := signInFlow(t, testcluster.NewBrowser(t), app, signInAs{email: nina, password: ninaPW}, pkce, "nonce-nina-1")
		tok, cl := exchangeCode(t, app, q, pkce, "nonce-nina-1")
		if cl.Org != gamma {
			t.Fatalf("organization_id %q, want the invited %q", cl.Org, gamma)
		}
		if ui := userinfoOn(t, c, 2, tok); ui.Email != nina || !ui.EmailVerified || ui.Subject != cl.Sub {
			t.Fatalf("userinfo of the invited person: %+v", ui)
		}
		ids[nina] = cl.Sub
		var got map[string]any
		doOn(t, c, 2, "GET", "/admin/v1/invitations/"+inv["id"].(string), testcluster.AdminToken, nil, &got)
		if got["status"] != "accepted" || got["accepted_by"] != cl.Sub || got["accepted_at"] == nil {
			t.Fatalf("the invitation after it was accepted: %v", got)
		}

		// A person who has an account: Ann signs in on the page and
		// gains the membership; someone else signed in there cannot.
		resp = doOn(t, c, 2, "POST", "/admin/v1/invitations", testcluster.AdminToken, map[string]any{"email": w.email, "organization_id": gamma}, &inv)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("invitation of %s: %d", w.email, resp.StatusCode)
		}
		m = pm.await(t, w.email, "invitation")
		b = testcluster.NewBrowser(t)
		page = b.Get(onNode(c, 1, m.Link))
		wantPage(t, page, http.StatusOK, "Sign in to accept the invitation")
		checkTokenPage(t, page, linkToken(t, m.Link))
		wrong := b.Submit(page, map[string]string{"email": nina, "password": ninaPW}, "method", "password")
		wantPage(t, wrong, http.StatusBadRequest, "This invitation is for "+w.email)
		confirm := b.Submit(wrong, map[string]string{"email": w.email, "password": w.password}, "method", "password")
		wantPage(t, confirm, http.StatusOK, "You are invited to join Gamma as "+w.email)
		wantPage(t, b.Submit(confirm, nil, "", ""), http.StatusOK, "You joined Gamma")

		// Her password is untouched: she signs in to Gamma's app with it.
		pkce = oauth2.GenerateVerifier()
		q, _ = signInFlow(t, testcluster.NewBrowser(t), app, signInAs{email: w.email, password: w.password}, pkce, "nonce-ann-gamma")
		if _, cl := exchangeCode(t, app, q, pkce, "nonce-ann-gamma"); cl.Org != gamma || cl.Sub != w.user {
			t.Fatalf("Ann at Gamma's app: %+v", cl)
		}
		// The link was used.
		wantPage(t, testcluster.NewBrowser(t).Get(onNode(c, 0, m.Link)), http.StatusGone, "This link does not work")
	})

	t.Run("RegistrationContinuesTheAuthorizationRequest", func(t *testing.T) {
		delta := newOrg(t, c, "delta", "Delta")
		var o map[string]any
		if resp := doOn(t, c, 2, "PATCH", "/admin/v1/organizations/"+delta, testcluster.AdminToken,
			map[string]any{"registration": map[string]any{"enabled": true, "email_domains": []string{"example.org"}}}, &o); resp.StatusCode != 200 {
			t.Fatalf("PATCH registration: %d %v", resp.StatusCode, o)
		}
		if reg, _ := o["registration"].(map[string]any); reg["enabled"] != true {
			t.Fatalf("organization after the PATCH: %v", o)
		}
		appID, secret := newApp(t, c, delta, "Delta App", false, w.cb)
		app := rpOn(t, c, 1, 0, appID, secret, w.cb)

		const state, nonce = "state-registration-42", "nonce-registration-42"
		pkce := oauth2.GenerateVerifier()
		b := testcluster.NewBrowser(t)
		signin := b.Follow(b.Get(app.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(pkce), gooidc.Nonce(nonce))), app.authBase())
		wantPage(t, signin, http.StatusOK, "Create an account")
		form := b.Get(hrefOf(t, signin, "Create an account"))
		wantPage(t, form, http.StatusOK, "join Delta")

		for _, bad := range []struct{ typed, want string }{
			{"eve@evil.example", "Use your address at example.org."},
			{"eve@exаmple.org", "Use your address at example.org."}, // a Cyrillic а
			{"eve@example.org.", "Enter an email address such as name@example.com."},
			{"Eve <eve@example.org>", "Enter an email address such as name@example.com."},
			{`"eve@example.org"@evil.example`, "Enter an email address such as name@example.com."},
			{"eve@example.org@evil.example", "Enter an email address such as name@example.com."},
		} {
			p := b.Submit(form, map[string]string{"email": bad.typed}, "", "")
			if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, `role="alert"`) || !strings.Contains(html.UnescapeString(p.Body), bad.want) {
				t.Errorf("register %q: got %d, want 400 saying %q:\n%s", bad.typed, p.Status, bad.want, p.Body)
			}
		}
		// Full-width letters are the plain ones, as a resolver reads them.
		wantPage(t, b.Submit(form, map[string]string{"email": "Eve@ｅｘａｍｐｌｅ.org"}, "", ""), http.StatusOK, "We sent a message to eve@example.org.")

		const rita, ritaPW = "rita@example.org", "rita registered herself"
		sent := b.Submit(form, map[string]string{"email": rita}, "", "")
		wantPage(t, sent, http.StatusOK, "We sent a message to "+rita)
		// An address that has an account: the same page, the address
		// aside, and a message that points to the forgotten password.
		const vera = "vera@example.org"
		exists := b.Submit(form, map[string]string{"email": vera}, "", "")
		if exists.Status != sent.Status || strings.ReplaceAll(exists.Body, vera, rita) != sent.Body {
			t.Errorf("registration of an address with an account answered differently:\n%d %s\n%d %s", exists.Status, exists.Body, sent.Status, sent.Body)
		}
		if m := pm.await(t, vera, "registration"); m.Link != "" || !strings.Contains(m.Text, c.Issuer()+"/password/forgot") {
			t.Errorf("registration of an address with an account: link %q, text\n%s", m.Link, m.Text)
		}
		m := pm.await(t, rita, "registration")
		if !strings.HasPrefix(m.Link, c.Issuer()+"/register/") || !strings.Contains(m.Text, "Delta") {
			t.Fatalf("registration message: %q\n%s", m.Link, m.Text)
		}
		pm.await(t, "eve@example.org", "registration")
		// In the same browser, on another node.
		page := b.Get(onNode(c, 2, m.Link))
		wantPage(t, page, http.StatusOK, "Choose a password for your new account with Delta.")
		checkTokenPage(t, page, linkToken(t, m.Link))
		made := b.Submit(page, map[string]string{"new_password": ritaPW}, "", "")
		if made.Status != http.StatusSeeOther || !strings.HasPrefix(made.Location(), c.URL(2)+"/authorize?") || made.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("after the password: %d %q (Referrer-Policy %q)\n%s", made.Status, made.Location(), made.Header.Get("Referrer-Policy"), made.Body)
		}
		end := b.Follow(made, c.URL(2))
		loc, err := url.Parse(end.Location())
		if err != nil || !strings.HasPrefix(end.Location(), w.cb+"?") || loc.Query().Get("state") != state || loc.Query().Get("code") == "" {
			t.Fatalf("the registration ended at %d %q, want the app's redirect_uri with a code and state %q\n%s", end.Status, end.Location(), state, end.Body)
		}
		tok, cl := exchangeCode(t, app, loc.Query(), pkce, nonce)
		if cl.Org != delta || !slices.Equal(cl.AMR, []string{"pwd"}) || cl.Sub == w.user {
			t.Fatalf("the new person's ID token: %+v", cl)
		}
		if ui := userinfoOn(t, c, 0, tok); ui.Email != rita || !ui.EmailVerified || ui.Subject != cl.Sub {
			t.Fatalf("userinfo of the new person: %+v", ui)
		}
		ids[rita] = cl.Sub
		for _, m := range pm.read(t) {
			if strings.Contains(m.To, "evil") || strings.Contains(m.To, "xn--") {
				t.Errorf("a refused address got a %s message: %s", m.Kind, m.To)
			}
		}
		wantPage(t, testcluster.NewBrowser(t).Get(onNode(c, 1, m.Link)), http.StatusGone, "This link does not work")
	})

	t.Run("NothingForAnAttacker", func(t *testing.T) {
		const known, unknown, pw = "otto@example.org", "nobody@example.org", "otto's old password"
		ids[known] = newPerson(t, c, known, pw, true, w.orgA)
		bk, bu := testcluster.NewBrowser(t), testcluster.NewBrowser(t)
		fk, fu := bk.Get(c.URL(1)+"/password/forgot"), bu.Get(c.URL(2)+"/password/forgot")
		if fk.Status != 200 || fu.Status != 200 || withoutSealed(fk.Body) != withoutSealed(fu.Body) {
			t.Fatalf("the forgotten-password page differs between nodes: %d %d", fk.Status, fu.Status)
		}
		start := time.Now()
		ak := bk.Submit(fk, map[string]string{"email": known}, "", "")
		dk := time.Since(start)
		start = time.Now()
		au := bu.Submit(fu, map[string]string{"email": unknown}, "", "")
		du := time.Since(start)
		wantPage(t, ak, http.StatusOK, "If an account exists for that address, we sent a link to it.")
		if au.Status != ak.Status || au.Body != ak.Body {
			t.Fatalf("known and unknown addresses answered differently:\n%d %s\n%d %s", ak.Status, ak.Body, au.Status, au.Body)
		}
		for _, h := range []string{"Content-Type", "Cache-Control", "Referrer-Policy", "Content-Length"} {
			if ak.Header.Get(h) != au.Header.Get(h) {
				t.Errorf("%s: %q for a known address, %q for an unknown one", h, ak.Header.Get(h), au.Header.Get(h))
			}
		}
		if dk < 250*time.Millisecond || du < 250*time.Millisecond {
			t.Errorf("answered in %v (known) and %v (unknown), want at least 250 ms each", dk, du)
		}
		t.Logf("forgotten-password answers: known %v, unknown %v", dk, du)

		m := pm.await(t, known, "password_reset")
		token := linkToken(t, m.Link)
		// Opening the link, as a mail scanner does, changes nothing.
		checkTokenPage(t, testcluster.NewBrowser(t).Get(onNode(c, 0, m.Link)), token)
		b := testcluster.NewBrowser(t)
		page := b.Get(onNode(c, 1, m.Link))
		wantPage(t, page, http.StatusOK, "Choose a new password")
		checkTokenPage(t, page, token)
		// The token on another link's page is no token there.
		for _, path := range []string{"/verify-email/", "/invite/", "/register/"} {
			wantPage(t, testcluster.NewBrowser(t).Get(c.URL(2)+path+token), http.StatusGone, "This link does not work")
		}
		done := b.Submit(page, map[string]string{"new_password": "otto's new password"}, "", "")
		wantPage(t, done, http.StatusOK, "Your password was changed")
		if done.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("the reset's answer: Referrer-Policy %q", done.Header.Get("Referrer-Policy"))
		}
		// Followed twice, or its form posted again: the invalid-link page.
		again := testcluster.NewBrowser(t).Get(onNode(c, 2, m.Link))
		wantPage(t, again, http.StatusGone, "This link does not work")
		checkTokenPage(t, again, token)
		wantPage(t, b.Submit(page, map[string]string{"new_password": "yet another password"}, "", ""), http.StatusGone, "This link does not work")
		pm.none(t, unknown)
	})

	t.Run("NoTokenInLogsOrAuditTrail", func(t *testing.T) {
		tokens := pm.tokens()
		if len(tokens) < 6 {
			t.Fatalf("only %d tokens seen", len(tokens))
		}
		events := checkNoTokens(t, c, logs, tokens, 1)
		for _, want := range []struct {
			typ, action, subject, message string
		}{
			{"verify_email", "sent", ids["vera@example.org"], ""},
			{"verify_email", "completed", ids["vera@example.org"], ""},
			{"invitation", "accepted", ids["nina@example.org"], ""},
			{"invitation", "accepted", w.user, ""},
			{"registration", "requested", "", ""},
			{"registration", "completed", ids["rita@example.org"], ""},
			{"password_reset", "requested", ids["otto@example.org"], "link"},
			{"password_reset", "requested", "", "none"},
			{"password_reset", "completed", ids["otto@example.org"], ""},
		} {
			if findEvent(events, func(e auditEvent) bool {
				return e.Type == want.typ && e.Detail["action"] == want.action && e.Subject == want.subject &&
					(want.message == "" || e.Detail["message"] == want.message)
			}) == nil {
				t.Errorf("no %s event %s of %q (message %q) in the trail", want.typ, want.action, want.subject, want.message)
			}
		}
		// Vera's address on Delta's registration page names her to no
		// one: the requests are recorded alike (TestRegistrationNamesNoOneToTheOrganization).
		if e := findEvent(events, func(e auditEvent) bool {
			return e.Type == "registration" && (e.Subject == ids["vera@example.org"] || e.Detail["message"] != "")
		}); e != nil {
			t.Errorf("a registration event tells whose address it was: %+v", *e)
		}
	})
}

// TestPasswordResetThroughExim: three nodes send through a real Exim
// (STARTTLS under its own CA, AUTH). A forgotten-password request
// acknowledged through a follower survives its leader's death; then a
// person with two app sessions and an authenticator app resets their
// password from another browser, found from the sign-in page's link:
// each app gets a valid back-channel logout token, the old tokens are
// inactive, the old password fails, the new one works and the second
// factor is still asked for.
func TestPasswordResetThroughExim(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "oidcd", Password: "relay-secret"})
	relay := newHeldRelay(t, srv.Addr()) // held until the first subtest releases it
	logs := &logSink{}
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(i int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.SMTPURL = "smtp://oidcd:relay-secret@" + relay.Addr()
		cfg.SMTPFrom = "Example ID <id@example.com>"
		cfg.SMTPCAFile = srv.CAFile
		cfg.Logger = logs.logger(i)
	}})
	w := provision(t, c)
	pm := newPostman(c.Issuer(), eximMail(srv, c.Issuer()))

	t.Run("NothingLostWhenTheLeaderDies", func(t *testing.T) {
		const lena, newPW = "lena@example.org", "lena after the election"
		newPerson(t, c, lena, "lena before the election", true, w.orgA)
		leader := c.WaitNewLeader()
		follower := (leader + 1) % 3
		b := testcluster.NewBrowser(t)
		ack := b.Submit(b.Get(c.URL(follower)+"/password/forgot"), map[string]string{"email": lena}, "", "")
		wantPage(t, ack, http.StatusOK, "If an account exists for that address")
		c.Kill(leader) // at once: the relay still holds the old leader's attempt
		next := c.WaitNewLeader()
		t.Logf("leader %d killed, %d leads; %d connections held at the relay", leader, next, relay.heldCount())
		relay.Release()
		m := pm.await(t, lena, "password_reset")
		// Its link works on what is left of the cluster.
		page := b.Get(onNode(c, follower, m.Link))
		wantPage(t, page, http.StatusOK, "Choose a new password")
		wantPage(t, b.Submit(page, map[string]string{"new_password": newPW}, "", ""), http.StatusOK, "Your password was changed")
		r := rpOn(t, c, follower, next, w.confID, w.confSecret, w.cb)
		pkce := oauth2.GenerateVerifier()
		q, _ := signInFlow(t, testcluster.NewBrowser(t), r, signInAs{email: lena, password: newPW}, pkce, "nonce-lena-1")
		exchangeCode(t, r, q, pkce, "nonce-lena-1")
		c.Restart(leader)
	})

	t.Run("ResetEndsEverySessionWithBackChannelLogouts", func(t *testing.T) {
		const rosa, oldPW, newPW = "rosa@example.org", "rosa's old password", "rosa's new password"
		id := newPerson(t, c, rosa, oldPW, true, w.orgA)
		var totp struct{ Secret string }
		if r := do(t, c, "POST", "/admin/v1/users/"+id+"/totp", testcluster.AdminToken, nil, &totp); r.StatusCode != 201 {
			t.Fatalf("totp: %d", r.StatusCode)
		}
		recvConf, recvPub := newBCReceiver(t, c, w.confID, nil), newBCReceiver(t, c, w.publicID, nil)
		setBackchannel(t, c, w.confID, recvConf.URL())
		setBackchannel(t, c, w.publicID, recvPub.URL())

		// Two app sessions in one browser: the confidential app (a
		// password), then the public one (single sign-on).
		conf := rpOn(t, c, 0, 1, w.confID, w.confSecret, w.cb)
		pub := rpOn(t, c, 1, 2, w.publicID, "", w.cb)
		b := testcluster.NewBrowser(t)
		pkce := oauth2.GenerateVerifier()
		q, _ := signInFlow(t, b, conf, signInAs{email: rosa, password: oldPW}, pkce, "nonce-rosa-1")
		tokConf, clConf := exchangeCode(t, conf, q, pkce, "nonce-rosa-1")
		pkce = oauth2.GenerateVerifier()
		q, _ = signInFlow(t, b, pub, signInAs{}, pkce, "nonce-rosa-2")
		tokPub, clPub := exchangeCode(t, pub, q, pkce, "nonce-rosa-2")
		if clConf.SID == clPub.SID || !active(t, c, w, tokConf.AccessToken) || !active(t, c, w, tokPub.AccessToken) {
			t.Fatalf("before the reset: sids %q %q, or a token inactive", clConf.SID, clPub.SID)
		}

		// Another browser: the first sign-in page's link.
		other := testcluster.NewBrowser(t)
		signin := other.Follow(other.Get(conf.oauth.AuthCodeURL("state-other-0123", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))), conf.authBase())
		forgot := other.Get(hrefOf(t, signin, "Forgot your password?"))
		wantPage(t, forgot, http.StatusOK, "Forgot your password?")
		if back := hrefOf(t, forgot, "Back to sign in"); !strings.Contains(back, "/authorize?") || !strings.Contains(back, "state=state-other-0123") {
			t.Errorf("the forgotten-password page leads back to %q, not the sign-in", back)
		}
		wantPage(t, other.Submit(forgot, map[string]string{"email": rosa}, "", ""), http.StatusOK, "If an account exists for that address")
		m := pm.await(t, rosa, "password_reset")
		if m.Subject != "Reset your password for "+email.Site(c.Issuer()) {
			t.Errorf("subject %q", m.Subject)
		}
		page := other.Get(onNode(c, 2, m.Link))
		wantPage(t, page, http.StatusOK, "For <strong>"+rosa+"</strong>")
		checkTokenPage(t, page, linkToken(t, m.Link))
		wantPage(t, other.Submit(page, map[string]string{"new_password": newPW}, "", ""), http.StatusOK, "Your password was changed")

		// Each app session gets its logout token, which go-oidc accepts
		// like an ID token (aud a plain string).
		ctx := gooidc.ClientContext(context.Background(), c.Client())
		for _, x := range []struct {
			recv     *bcReceiver
			clientID string
			sid      string
		}{{recvConf, w.confID, clConf.SID}, {recvPub, w.publicID, clPub.SID}} {
			got := x.recv.waitAccepted(1)
			idt, err := conf.provider.Verifier(&gooidc.Config{ClientID: x.clientID}).Verify(ctx, got[0].Raw)
			if err != nil {
				t.Fatalf("go-oidc rejected the logout token of %s: %v", x.clientID, err)
			}
			var cl struct {
				Sub    string                     `json:"sub"`
				SID    string                     `json:"sid"`
				Events map[string]json.RawMessage `json:"events"`
			}
			if err := idt.Claims(&cl); err != nil || cl.Sub != id || cl.SID != x.sid || string(cl.Events[backchannelEvent]) != "{}" || len(got) != 1 {
				t.Fatalf("logout token of %s: %+v (%d tokens), want sub %s sid %s", x.clientID, cl, len(got), id, x.sid)
			}
		}
		if active(t, c, w, tokConf.AccessToken) || active(t, c, w, tokPub.AccessToken) {
			t.Fatal("an access token of before the reset is still active at introspection")
		}

		// The old password fails; the new one works, and an app that asks
		// for a second factor (acr_values mfa) still gets the code asked
		// for: the reset removed no factor.
		fresh := testcluster.NewBrowser(t)
		first := fresh.Follow(fresh.Get(conf.oauth.AuthCodeURL("state-old-password", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))), conf.authBase())
		if p := fresh.Submit(first, map[string]string{"email": rosa, "password": oldPW}, "method", "password"); p.Status != http.StatusBadRequest {
			t.Fatalf("the old password: %d", p.Status)
		}
		pkce = oauth2.GenerateVerifier()
		mfa := oauth2.SetAuthURLParam("acr_values", "urn:service:sso:acr:mfa")
		q, asked := signInFlow(t, testcluster.NewBrowser(t), conf, signInAs{email: rosa, password: newPW, totp: totp.Secret}, pkce, "nonce-rosa-3", mfa)
		_, cl := exchangeCode(t, conf, q, pkce, "nonce-rosa-3")
		if !asked || cl.Sub != id || !slices.Equal(cl.AMR, []string{"pwd", "otp"}) || cl.ACR != "urn:service:sso:acr:mfa" {
			t.Fatalf("after the reset: second factor asked %v, claims %+v", asked, cl)
		}
	})

	t.Run("NoTokenInLogsOrAuditTrail", func(t *testing.T) {
		checkNoTokens(t, c, logs, pm.tokens(), 2)
	})
}

// TestSelfServiceOnALaggingFollower: a follower cut off from the others
// misses writes, and is asked right after it is back, before it has
// caught up. A person created meanwhile asks for a reset through it: the
// page says a link went out if an account has the address, so it must go
// out. A link used, or an invitation withdrawn, meanwhile: its page there
// says the link does not work, as on every other node.
func TestSelfServiceOnALaggingFollower(t *testing.T) {
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(i int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.EmailOutbox = outbox
	}})
	pm := newPostman(c.Issuer(), outboxMail(outbox))
	leader := c.WaitNewLeader()
	lagging := (leader + 1) % 3
	admin := func(method, path string, body, out any) int {
		t.Helper()
		return doOn(t, c, leader, method, path, testcluster.AdminToken, body, out).StatusCode
	}

	// A person created while the follower was away.
	b := testcluster.NewBrowser(t)
	form := b.Get(c.URL(lagging) + "/password/forgot")
	c.Partition(lagging)
	const addr = "mia@example.org"
	if st := admin("POST", "/admin/v1/users", map[string]any{"email": addr, "password": "mia's first password"}, nil); st != 201 {
		t.Fatalf("create %s: %d", addr, st)
	}
	c.Heal()
	wantPage(t, b.Submit(form, map[string]string{"email": addr}, "", ""), http.StatusOK, "If an account exists for that address")
	reset := pm.await(t, addr, "password_reset")

	// Its link used while the follower was away.
	c.Partition(lagging)
	page := b.Get(onNode(c, leader, reset.Link))
	wantPage(t, b.Submit(page, map[string]string{"new_password": "mia's second password"}, "", ""), http.StatusOK, "Your password was changed")
	c.Heal()
	wantPage(t, testcluster.NewBrowser(t).Get(onNode(c, lagging, reset.Link)), http.StatusGone, "This link does not work")

	// An invitation withdrawn while the follower was away.
	var o, inv map[string]any
	admin("POST", "/admin/v1/organizations", map[string]any{"slug": "epsilon", "name": "Epsilon"}, &o)
	if st := admin("POST", "/admin/v1/invitations", map[string]any{"email": "noa@example.org", "organization_id": o["id"]}, &inv); st != 201 {
		t.Fatalf("invitation: %d", st)
	}
	invite := pm.await(t, "noa@example.org", "invitation")
	wantPage(t, testcluster.NewBrowser(t).Get(onNode(c, lagging, invite.Link)), http.StatusOK, "You are invited to join Epsilon.")
	c.Partition(lagging)
	if st := admin("DELETE", "/admin/v1/invitations/"+inv["id"].(string), nil, nil); st != http.StatusNoContent {
		t.Fatalf("withdraw: %d", st)
	}
	c.Heal()
	wantPage(t, testcluster.NewBrowser(t).Get(onNode(c, lagging, invite.Link)), http.StatusGone, "This link does not work")
}
