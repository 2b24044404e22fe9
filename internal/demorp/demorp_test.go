package demorp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/demorp"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// setup starts one demo node whose demo client registers the URIs of a
// demo-rp that it also starts, in process, on a free 127.0.0.1 port.
func setup(t *testing.T) (*testcluster.Cluster, *demorp.App, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	c := testcluster.New(t, testcluster.Options{Size: 1, Demo: true, Configure: func(_ int, cfg *node.Config) {
		cfg.DemoRedirectURI = base + demorp.PathCallback
	}})
	waitFor(t, "the demo client", func() bool {
		_, err := c.Node(0).FSM().State().Client(node.DemoClientID)
		return err == nil
	})
	app, err := demorp.New(demorp.Config{Issuer: c.Issuer(), BaseURL: base, ClientID: node.DemoClientID})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- demorp.Serve(ctx, ln, app) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo-rp: %v", err)
		}
	})
	return c, app, base
}

// waitFor polls cond every 20 ms for at most 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signIn goes from demo-rp's home page through the provider's pages back
// to demo-rp, and returns the signed-in home page.
func signIn(t *testing.T, b *testcluster.Browser, c *testcluster.Cluster, base string, password bool) *testcluster.Page {
	t.Helper()
	home := b.Get(base + "/")
	if !strings.Contains(home.Body, `id="signin"`) {
		t.Fatalf("home page has no sign-in link:\n%s", home.Body)
	}
	p := b.Get(base + "/login")
	if !strings.HasPrefix(p.Location(), c.Issuer()+"/authorize?") {
		t.Fatalf("/login: got %d to %q, want the provider's /authorize", p.Status, p.Location())
	}
	q, _ := url.Parse(p.Location())
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if q.Query().Get(k) == "" {
			t.Errorf("authorization request has no %s", k)
		}
	}
	if got := q.Query().Get("code_challenge_method"); got != "S256" {
		t.Errorf("got code_challenge_method %q, want S256", got)
	}
	p = b.Follow(p, c.Issuer())
	for i := 0; i < 4 && strings.HasPrefix(p.URL.String(), c.Issuer()) && !strings.HasPrefix(p.Location(), base); i++ {
		switch {
		case strings.Contains(p.Body, `name="password"`):
			if !password {
				t.Fatal("asked for a password within a live SSO session")
			}
			p = b.Submit(p, map[string]string{"email": node.DemoEmail, "password": node.DemoPassword}, "method", "password")
		case strings.Contains(p.Body, `value="allow"`):
			p = b.Submit(p, nil, "decision", "allow")
		default:
			t.Fatalf("unexpected page %d at %s:\n%s", p.Status, p.URL, p.Body)
		}
		p = b.Follow(p, c.Issuer())
	}
	if !strings.HasPrefix(p.Location(), base+demorp.PathCallback+"?") {
		t.Fatalf("sign-in ended at %d %q, want demo-rp's callback", p.Status, p.Location())
	}
	p = b.Get(p.Location())
	if p.Status != http.StatusSeeOther || p.Location() != base+"/" {
		t.Fatalf("callback: got %d to %q\n%s", p.Status, p.Location(), p.Body)
	}
	home = b.Get(base + "/")
	for _, want := range []string{`id="signout"`, node.DemoEmail, `&#34;sid&#34;`, `&#34;organization_id&#34;`, `&#34;org_slug&#34;: &#34;demo&#34;`} {
		if !strings.Contains(home.Body, want) {
			t.Errorf("signed-in page lacks %s:\n%s", want, home.Body)
		}
	}
	return home
}

// sid reads the sid claim shown on the signed-in page.
func sid(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `&#34;sid&#34;: &#34;`)
	if !ok {
		t.Fatalf("no sid on the page")
	}
	v, _, _ := strings.Cut(rest, `&#34;`)
	return v
}

// TestDemoRP drives demo-rp against a real node with a cookie-keeping
// HTTP client: sign in, claims, userinfo and memberships shown; sign out
// through the provider (the back-channel token for that sid arrives too);
// sign in again and have the operator delete the organization, which
// ends the session by a sub-only back-channel logout that the page shows.
func TestDemoRP(t *testing.T) {
	c, app, base := setup(t)
	b := testcluster.NewBrowser(t)

	home := signIn(t, b, c, base, true)
	first := sid(t, home.Body)

	// RP-initiated logout, front channel.
	p := b.Submit(home, nil, "action", "signout")
	if !strings.HasPrefix(p.Location(), c.Issuer()+"/logout?") {
		t.Fatalf("sign out: got %d to %q, want the provider's /logout", p.Status, p.Location())
	}
	lq, _ := url.Parse(p.Location())
	if lq.Query().Get("id_token_hint") == "" || lq.Query().Get("post_logout_redirect_uri") != base+demorp.PathSignedOut {
		t.Errorf("logout request %q lacks the hint or the post-logout URI", p.Location())
	}
	p = b.Get(p.Location())
	if !strings.HasPrefix(p.Location(), base+demorp.PathSignedOut+"?") {
		t.Fatalf("provider logout: got %d to %q\n%s", p.Status, p.Location(), p.Body)
	}
	p = b.Get(p.Location())
	if !strings.Contains(p.Body, "signed out here and at the provider") || !strings.Contains(p.Body, `id="signin"`) {
		t.Errorf("signed-out page:\n%s", p.Body)
	}
	// The provider also announces the ended app session over the back
	// channel.
	waitFor(t, "the back-channel logout of the first sid", func() bool {
		for _, ev := range app.Events() {
			if ev.SID == first && ev.Error == "" {
				return true
			}
		}
		return false
	})

	// The SSO session ended, so signing in asks for the password again.
	home = signIn(t, b, c, base, true)
	second := sid(t, home.Body)
	if second == first {
		t.Errorf("got the same sid %q after signing out", second)
	}

	// The operator deletes the organization: the app session ends with a
	// sub-only logout token, and the page says so.
	var orgs struct {
		Data []struct{ ID, Slug string } `json:"data"`
	}
	admin(t, c, "GET", "/admin/v1/organizations", &orgs)
	if len(orgs.Data) != 1 || orgs.Data[0].Slug != node.DemoOrgSlug {
		t.Fatalf("got organizations %+v", orgs.Data)
	}
	admin(t, c, "DELETE", "/admin/v1/organizations/"+orgs.Data[0].ID, nil)
	waitFor(t, "the sub-only back-channel logout", func() bool {
		for _, ev := range app.Events() {
			if ev.SID == "" && ev.Sub != "" && ev.Ended == 1 && ev.Error == "" {
				return true
			}
		}
		return false
	})
	home = b.Get(base + "/")
	if !strings.Contains(home.Body, `id="ended"`) || !strings.Contains(home.Body, "back-channel logout") {
		t.Errorf("after the organization's deletion the page does not say the session ended:\n%s", home.Body)
	}
	if strings.Contains(home.Body, `id="signout"`) {
		t.Error("an ended session still offers sign-out")
	}
}

func admin(t *testing.T, c *testcluster.Cluster, method, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, c.URL(0)+path, nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackchannelLogoutRefusesBadTokens: what is not a logout token of
// this client ends nothing and is answered 400.
func TestBackchannelLogoutRefusesBadTokens(t *testing.T) {
	c, app, base := setup(t)

	// A real ID token of this client: the hint of a sign-out redirect in
	// another browser, not followed.
	other := testcluster.NewBrowser(t)
	p := other.Submit(signIn(t, other, c, base, true), nil, "action", "signout")
	lq, err := url.Parse(p.Location())
	if err != nil {
		t.Fatal(err)
	}
	idToken := lq.Query().Get("id_token_hint")
	if idToken == "" {
		t.Fatalf("no id_token_hint in %q", p.Location())
	}

	b := testcluster.NewBrowser(t)
	signIn(t, b, c, base, true)
	for _, tc := range []struct{ name, token string }{
		{"empty", ""},
		{"garbage", "not.a.jwt"},
		{"an ID token", idToken}, // signed by the provider, but a nonce and no logout event
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.PostForm(base+demorp.PathBackchannelLogout, url.Values{"logout_token": {tc.token}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("got %d, want 400", resp.StatusCode)
			}
		})
	}
	if home := b.Get(base + "/"); !strings.Contains(home.Body, `id="signout"`) {
		t.Error("a refused token ended the session")
	}
	events := app.Events()
	if len(events) != 3 {
		t.Errorf("got %d events, want 3 refusals: %+v", len(events), events)
	}
	for _, ev := range events {
		if ev.Error == "" {
			t.Errorf("event %+v accepted", ev)
		}
	}
}

func TestMainFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"--addr", "0.0.0.0:9090"}, 2},
		{[]string{"--addr", "192.0.2.1:9090"}, 2},
		{[]string{"--nope"}, 2},
		{[]string{"extra"}, 2},
	} {
		var out, errOut bytes.Buffer
		if got := demorp.Main(tc.args, &out, &errOut); got != tc.want {
			t.Errorf("Main(%q): got %d, want %d (%s)", tc.args, got, tc.want, errOut.String())
		}
	}
}
