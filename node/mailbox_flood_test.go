package node_test

import (
	"html"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestNoMailboxFloodThroughTheAccountPage is issue 42's flood, end to end
// on three nodes sharing one outbox file: an organization lets anyone at
// a public domain register; an attacker registers accounts through the
// public page with subaddresses of one mailbox (the fourth of that
// mailbox within the hour gets no message, and its page says the same),
// then four accounts ask /account, five times each and through every
// node, for a new address at one stranger's. At most 3 verify_email
// messages reach the stranger, and every answer is the page of a message
// sent.
func TestNoMailboxFloodThroughTheAccountPage(t *testing.T) {
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.EmailOutbox = outbox
	}})
	w := provision(t, c)
	pm := newPostman(c.Issuer(), outboxMail(outbox))
	open := newOrg(t, c, "open", "Open")
	if r := do(t, c, "PATCH", "/admin/v1/organizations/"+open, testcluster.AdminToken,
		map[string]any{"registration": map[string]any{"enabled": true, "email_domains": []string{"example.org"}}}, nil); r.StatusCode != 200 {
		t.Fatalf("PATCH registration: %d", r.StatusCode)
	}
	appID, secret := newApp(t, c, open, "Open App", false, w.cb)

	// Registration, each from its own browser and node, all of one
	// authorization request, so that their pages compare.
	pkce := oauth2.GenerateVerifier()
	registerForm := func(b *testcluster.Browser, i int) *testcluster.Page {
		t.Helper()
		app := rpOn(t, c, i, i, appID, secret, w.cb)
		signin := b.Follow(b.Get(app.oauth.AuthCodeURL("state-flood-0123", oauth2.S256ChallengeOption(pkce))), app.authBase())
		return b.Get(hrefOf(t, signin, "Create an account"))
	}
	var sentPage *testcluster.Page
	browsers := map[string]*testcluster.Browser{}
	for i, addr := range []string{"mallory+1@example.org", "mallory+2@example.org", "mallory+3@example.org", "mallory+4@example.org", "eve+1@example.org"} {
		b := testcluster.NewBrowser(t)
		browsers[addr] = b
		p := b.Submit(registerForm(b, i%3), map[string]string{"email": addr}, "", "")
		wantPage(t, p, http.StatusOK, "We sent a message to "+addr)
		if sentPage == nil {
			sentPage = p
		} else if strings.ReplaceAll(html.UnescapeString(p.Body), addr, "mallory+1@example.org") != html.UnescapeString(sentPage.Body) {
			t.Errorf("the registration page of %s answers otherwise:\n%s", addr, p.Body)
		}
	}
	var accounts []string
	for _, addr := range []string{"mallory+1@example.org", "mallory+2@example.org", "mallory+3@example.org", "eve+1@example.org"} {
		m := pm.await(t, addr, "registration")
		b := browsers[addr]
		made := b.Submit(b.Get(onNode(c, len(accounts)%3, m.Link)), map[string]string{"new_password": "a flood of one's own " + addr}, "", "")
		if made.Status != http.StatusSeeOther {
			t.Fatalf("registration of %s: %d\n%s", addr, made.Status, made.Body)
		}
		accounts = append(accounts, addr)
	}

	// Every account asks for the stranger's address, five times, through
	// every node.
	const stranger = "stranger@example.net"
	for i, addr := range accounts {
		b := browsers[addr]
		var first *testcluster.Page
		for j := range 5 {
			home := b.Get(c.URL((i+j)%3) + "/account")
			wantPage(t, home, http.StatusOK, addr)
			p := b.Submit(home, map[string]string{"new_email": stranger}, "action", "email-change")
			wantPage(t, p, http.StatusOK, "Pending: we sent a link to "+stranger)
			if first == nil {
				first = p
			} else if withoutSealed(p.Body) != withoutSealed(first.Body) {
				t.Errorf("%s's request %d answers otherwise than its first:\n%s", addr, j+1, p.Body)
			}
		}
	}

	// Every message committed is delivered: then the outbox is the whole
	// story.
	st := c.Node(c.Leader()).FSM().State()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stats, err := st.EmailStats()
		if err != nil {
			t.Fatal(err)
		}
		if stats.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still pending", stats.Pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n, mallory := 0, 0
	for _, m := range pm.read(t) {
		if m.To == stranger {
			n++
			if m.Kind != "verify_email" {
				t.Errorf("a %s message to the stranger", m.Kind)
			}
		}
		if strings.HasPrefix(m.To, "mallory") {
			mallory++
		}
	}
	if n > 3 {
		t.Errorf("%d messages reached the stranger, want at most 3", n)
	}
	if n == 0 {
		t.Error("no message reached the stranger: the limit is not what stopped the flood")
	}
	if mallory != 3 {
		t.Errorf("%d registration messages to one mailbox's subaddresses in an hour, want 3", mallory)
	}
}
