package axe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/mail"
	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/internal/testkit/testclock"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// site is one node with a person who has a password, an authenticator
// app and a phone, in two organizations, and the applications that lead
// to every page: one that asks for consent, one of several organizations
// (the picker). Mail and text messages go to outbox files.
type site struct {
	c                *testcluster.Cluster
	clock            *testclock.Clock // each authenticator-app code is taken at a fresh 30-second step
	mail, sms        string
	orgA, orgB, user string
	consentID        string // org A's application that asks for consent
	multiID          string // org A's application of several organizations
	cb               string
	seen             map[string]bool
}

const (
	annEmail    = "ann@example.com"
	annPassword = "correct horse battery"
	annPhone    = "+15550100001"
)

func newSite(t *testing.T) *site {
	t.Helper()
	dir := t.TempDir()
	s := &site{clock: testclock.New(time.Now().UTC()), mail: filepath.Join(dir, "mail.jsonl"), sms: filepath.Join(dir, "sms.jsonl"), seen: map[string]bool{}}
	s.c = testcluster.New(t, testcluster.Options{Hostname: "localhost", Now: s.clock.Now,
		Verbose: os.Getenv("OIDCD_TEST_VERBOSE") != "",
		Configure: func(_ int, cfg *node.Config) {
			cfg.RateLimit = "off"
			cfg.EmailOutbox = s.mail
			cfg.SMSOutbox = s.sms
		}})
	var o map[string]any
	s.admin(t, "POST", "/admin/v1/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &o, 201)
	s.orgA = o["id"].(string)
	s.admin(t, "POST", "/admin/v1/organizations", map[string]any{"slug": "beta", "name": "Beta"}, &o, 201)
	s.orgB = o["id"].(string)
	s.admin(t, "PATCH", "/admin/v1/organizations/"+s.orgA, map[string]any{"registration": map[string]any{"enabled": true, "email_domains": []string{"example.com"}}}, nil, 200)
	var u map[string]any
	s.admin(t, "POST", "/admin/v1/users", map[string]any{"email": annEmail, "email_verified": true, "password": annPassword, "phone": annPhone}, &u, 201)
	s.user = u["id"].(string)
	for _, org := range []string{s.orgA, s.orgB} {
		s.admin(t, "POST", "/admin/v1/memberships", map[string]any{"user_id": s.user, "org_id": org}, nil, 201)
	}
	s.cb = callbackServer(t)
	var cl map[string]any
	s.admin(t, "POST", "/admin/v1/clients", map[string]any{"name": "Team Notes", "type": "public", "redirect_uris": []string{s.cb},
		"scopes": []string{"openid", "email"}, "organization_id": s.orgA}, &cl, 201)
	s.consentID = cl["client_id"].(string)
	s.admin(t, "POST", "/admin/v1/clients", map[string]any{"name": "Shared Calendar", "type": "public", "redirect_uris": []string{s.cb},
		"scopes": []string{"openid", "email"}, "organization_id": s.orgA, "multi_organization": true, "skip_consent": true}, &cl, 201)
	s.multiID = cl["client_id"].(string)
	// A site provider: the sign-in page shows its button in every
	// language (nothing here signs in through it, so its issuer is
	// never asked).
	s.admin(t, "POST", "/admin/v1/identity-providers", map[string]any{"slug": "corp", "display_name": "Corp Directory",
		"issuer": "http://127.0.0.1:9", "client_id": "oidcd", "client_secret": "never-used"}, nil, 201)
	return s
}

// totp gives the person an authenticator app and returns its secret.
func (s *site) totp(t *testing.T) string {
	t.Helper()
	var totp struct{ Secret string }
	s.admin(t, "POST", "/admin/v1/users/"+s.user+"/totp", nil, &totp, 201)
	return totp.Secret
}

// code is the authenticator app's code at a fresh step of the clock.
func (s *site) code(t *testing.T, secret string) string {
	t.Helper()
	s.clock.Add(31 * time.Second)
	code, err := factor.TOTPCode(secret, s.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// admin calls the admin API and checks the status.
func (s *site) admin(t *testing.T, method, path string, body, out any, want int) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.c.URL(0)+path, rd)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// authorize is an authorization request of client, in language lang.
func (s *site) authorize(client, lang string, extra ...oauth2.AuthCodeOption) (string, string) {
	cfg := s.oauth(client)
	verifier := oauth2.GenerateVerifier()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "nonce-0123456789")}, extra...)
	if lang != "" {
		opts = append(opts, oauth2.SetAuthURLParam("ui_locales", lang))
	}
	return cfg.AuthCodeURL("state-0123456789", opts...), verifier
}

func (s *site) oauth(client string) oauth2.Config {
	return oauth2.Config{ClientID: client, RedirectURL: s.cb, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: s.c.Issuer() + "/authorize", TokenURL: s.c.Issuer() + "/oauth2/token", AuthStyle: oauth2.AuthStyleInParams}}
}

// idToken redeems the code of a redirect to the callback.
func (s *site) idToken(t *testing.T, client, callback, verifier string) string {
	t.Helper()
	i := strings.Index(callback, "code=")
	if i < 0 {
		t.Fatalf("no code in %s", callback)
	}
	code, _, _ := strings.Cut(callback[i+len("code="):], "&")
	cfg := s.oauth(client)
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, s.c.Client())
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	idt, _ := tok.Extra("id_token").(string)
	if idt == "" {
		t.Fatal("no id_token")
	}
	return idt
}

// link waits for a message of kind to addr in the mail outbox that is not
// one of seen, and returns its link.
func (s *site) link(t *testing.T, addr, kind string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if f, err := os.Open(s.mail); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var m mail.OutboxLine
				if json.Unmarshal(sc.Bytes(), &m) == nil && m.To == addr && m.Kind == kind && m.Link != "" && !s.seen[m.Link] {
					s.seen[m.Link] = true
					f.Close()
					return m.Link
				}
			}
			f.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s message to %s in the outbox", kind, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const (
	siteName = "Northwind Public Services"
	orgName  = "Alpha Cooperative"
)

// brand is a branding as PUT /admin/v1/branding takes it.
type brand struct {
	name string
	body map[string]any
}

// siteBrand: a PNG logo, a dark red, support link and address.
func siteBrand(t *testing.T) brand {
	return brand{"site", map[string]any{
		"display_name": siteName, "logo": pngLogo(t), "primary_color": "#8a1538",
		"support_url": "https://help.example.com/sign-in", "support_email": "help@example.com",
	}}
}

// orgBrand: an SVG logo, a dark green, its own support.
func orgBrand() brand {
	svg := `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 120 40"><rect width="120" height="40" rx="8" fill="#0b5d3b"/><circle cx="20" cy="20" r="10" fill="#ffffff"/><rect x="38" y="14" width="70" height="12" rx="3" fill="#ffffff"/></svg>`
	return brand{"org", map[string]any{
		"display_name": orgName, "logo": "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(svg)),
		"primary_color": "#0b5d3b", "support_url": "https://alpha.example.org/help", "support_email": "it@alpha.example.org",
	}}
}

// pngLogo is a 160×48 PNG: a dark red band with a white square.
func pngLogo(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 160, 48))
	for y := 0; y < 48; y++ {
		for x := 0; x < 160; x++ {
			c := color.RGBA{0x8a, 0x15, 0x38, 0xff}
			if x > 12 && x < 36 && y > 12 && y < 36 {
				c = color.RGBA{0xff, 0xff, 0xff, 0xff}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// callbackServer is a relying party's redirect URI that answers 200.
func callbackServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "signed in") }))
	t.Cleanup(srv.Close)
	return srv.URL + "/callback"
}

// cdpDo runs one protocol command in the tab.
func cdpDo(t *testing.T, ctx context.Context, f func(ctx context.Context, tg *chromedp.Target) error) {
	t.Helper()
	chrometest.Do(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		return chromedp.Void{}, f(ctx, tg)
	})
}

// fresh forgets the tab's cookies (its session) and sets the language
// cookie to lang, as the sign-in page's picker would.
func fresh(t *testing.T, ctx context.Context, issuer, lang string) {
	t.Helper()
	cdpDo(t, ctx, func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: "oidcd_lang", Value: lang, URL: issuer + "/"})
		return err
	})
}

// colorScheme emulates prefers-color-scheme.
func colorScheme(t *testing.T, ctx context.Context, scheme string) {
	t.Helper()
	cdpDo(t, ctx, func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// narrow makes the tab a 360 px wide phone screen.
func narrow(t *testing.T, ctx context.Context) {
	t.Helper()
	cdpDo(t, ctx, func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: 360, Height: 740, DeviceScaleFactor: 1, Mobile: true})
		return err
	})
}
