package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/uuid"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestOrgAdminCannotPullInAnotherOrganizationsPerson is issue 42's first
// attack, as an org_admin of A does it through the product (its API key,
// A's registration page, A's audit trail) on three real nodes. Bob is a
// member of B only. The org_admin opens A's registration for Bob's
// domain, posts Bob's address on A's /register page and reads A's audit
// trail, and tries Bob's address with a wrong password on A's sign-in
// page: no event of A's names Bob. Asking for Bob's membership of A answers as
// for an id that names no one, word for word and in about the same
// time, and Bob stays out of its sight (his record, factors, address
// lookup and memberships). An invitation is the way in: only once Bob
// signs in on its page and accepts is he A's member, and even then A's
// org_admin may read but not change him.
func TestOrgAdminCannotPullInAnotherOrganizationsPerson(t *testing.T) {
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.EmailOutbox = outbox
	}})
	c.WaitLeader()
	pm := newPostman(c.Issuer(), outboxMail(outbox))
	orgA, orgB := newOrg(t, c, "acme", "Acme"), newOrg(t, c, "bravo", "Bravo")
	const bobAddr, bobPW = "bob@bravo.example", "bob's own passphrase"
	bob := newPerson(t, c, bobAddr, bobPW, true, orgB)
	dave := newPerson(t, c, "dave@bravo.example", "dave's own passphrase", true) // of no organization
	const cb = "http://127.0.0.1:9/callback"
	appID, secret := newApp(t, c, orgA, "Acme App", false, cb)
	var key struct{ Key string }
	if r := do(t, c, "POST", "/admin/v1/api-keys", testcluster.AdminToken,
		map[string]any{"name": "acme-ops", "role": "org_admin", "organization_id": orgA, "expires_in": 3600}, &key); r.StatusCode != http.StatusCreated {
		t.Fatalf("org_admin key: %d", r.StatusCode)
	}
	// call is the org_admin's request on node i: status and raw body.
	call := func(i int, method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, c.URL(i)+"/admin/v1"+path, rd)
		req.Header.Set("Authorization", "Bearer "+key.Key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	outOfSight := func(when string) {
		t.Helper()
		for _, path := range []string{"/users/" + bob, "/users/" + bob + "/factors", "/users/" + dave} {
			if st, raw := call(2, "GET", path, nil); st != http.StatusNotFound {
				t.Errorf("%s: GET %s: got %d, want 404: %s", when, path, st, raw)
			}
		}
		for _, path := range []string{"/users?email=" + bobAddr, "/memberships?user_id=" + bob} {
			st, raw := call(1, "GET", path, nil)
			var list struct{ Data []json.RawMessage }
			if json.Unmarshal(raw, &list); st != http.StatusOK || len(list.Data) != 0 {
				t.Errorf("%s: GET %s: got %d %s, want 200 and nothing", when, path, st, raw)
			}
		}
	}
	outOfSight("at first")

	// 1. A's registration, opened for Bob's domain: only an admin adds
	// a registration domain, so the org_admin is refused, and the attack
	// goes on as if an admin had been talked into it (or the domain were
	// one many organizations share).
	openFor := map[string]any{"registration": map[string]any{"enabled": true, "email_domains": []string{"bravo.example"}}}
	if st, raw := call(1, "PATCH", "/organizations/"+orgA, openFor); st != http.StatusForbidden {
		t.Errorf("org_admin opens A's registration for bravo.example: %d %s, want 403", st, raw)
	}
	if r := doOn(t, c, 1, "PATCH", "/admin/v1/organizations/"+orgA, testcluster.AdminToken, openFor, nil); r.StatusCode != http.StatusOK { // node 1 serves the pages below
		t.Fatalf("admin opens A's registration: %d", r.StatusCode)
	}
	// 2. Bob's address on A's /register page.
	app := rpOn(t, c, 1, 1, appID, secret, cb)
	b := testcluster.NewBrowser(t)
	signin := b.Follow(b.Get(app.oauth.AuthCodeURL("state-sec42-0123", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), gooidc.Nonce("nonce-sec42"))), app.authBase())
	form := b.Get(hrefOf(t, signin, "Create an account"))
	wantPage(t, b.Submit(form, map[string]string{"email": bobAddr}, "", ""), http.StatusOK, "We sent a message to "+bobAddr)
	if m := pm.await(t, bobAddr, "registration"); m.Link != "" || !strings.Contains(m.Text, c.Issuer()+"/password/forgot") {
		t.Errorf("Bob's message: link %q, text\n%s", m.Link, m.Text)
	}
	// ... and on A's sign-in page, with a wrong password.
	wrong := testcluster.NewBrowser(t)
	page0 := wrong.Follow(wrong.Get(app.oauth.AuthCodeURL("state-sec42-4567", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), gooidc.Nonce("nonce-sec42"))), app.authBase())
	if p := wrong.Submit(page0, map[string]string{"email": bobAddr, "password": "a guess at bob's"}, "method", "password"); p.Status != http.StatusBadRequest {
		t.Fatalf("a wrong password for Bob: %d", p.Status)
	}
	// 3. A's audit trail, as its org_admin reads it.
	st, raw := call(2, "GET", "/audit?type=registration", nil)
	var trail struct{ Data []auditEvent }
	if err := json.Unmarshal(raw, &trail); st != http.StatusOK || err != nil || len(trail.Data) == 0 {
		t.Fatalf("A's registration events: %d %s", st, raw)
	}
	if bytes.Contains(raw, []byte(bob)) || bytes.Contains(raw, []byte(`"exists"`)) {
		t.Errorf("A's trail names Bob or says his address has an account: %s", raw)
	}
	for _, e := range trail.Data {
		if e.Subject != "" || e.OrgID != orgA {
			t.Errorf("registration event %+v: a subject, or not A's", e)
		}
	}
	if st, raw := call(0, "GET", "/audit", nil); st != http.StatusOK || bytes.Contains(raw, []byte(bob)) {
		t.Errorf("A's whole trail: %d, names Bob: %v", st, bytes.Contains(raw, []byte(bob)))
	}

	// 4. Bob's membership of A, asked for by the org_admin: the answer of
	// an unknown id, on each node, and no faster or slower than it.
	answer := func(raw []byte) string {
		var env struct{ Error map[string]any }
		json.Unmarshal(raw, &env)
		delete(env.Error, "correlation_id")
		delete(env.Error, "timestamp")
		out, _ := json.Marshal(env.Error)
		return string(out)
	}
	ask := func(i int, user string) (int, string, time.Duration) {
		start := time.Now()
		st, raw := call(i, "POST", "/memberships", map[string]any{"user_id": user, "org_id": orgA})
		return st, answer(raw), time.Since(start)
	}
	var tBob, tUnknown []time.Duration
	for n := range 21 {
		i := n % 3
		sU, aU, dU := ask(i, uuid.NewString())
		sB, aB, dB := ask(i, bob)
		sD, aD, _ := ask(i, dave)
		if sB == http.StatusCreated || sB != sU || aB != aU || sD != sU || aD != aU {
			t.Fatalf("node %d: Bob's membership %d %s, Dave's %d %s; an unknown id's %d %s", i, sB, aB, sD, aD, sU, aU)
		}
		tBob, tUnknown = append(tBob, dB), append(tUnknown, dU)
	}
	slices.Sort(tBob)
	slices.Sort(tUnknown)
	mb, mu := tBob[len(tBob)/2], tUnknown[len(tUnknown)/2]
	t.Logf("median answer: Bob %v, an unknown id %v", mb, mu)
	if mb > 3*mu+2*time.Millisecond || mu > 3*mb+2*time.Millisecond {
		t.Errorf("Bob's refusal takes %v, an unknown id %v: the time tells them apart", mb, mu)
	}
	// The tricks of the JSON body change nothing.
	for _, body := range []string{
		`{"user_id":"` + strings.ToUpper(bob) + `","org_id":"` + strings.ToUpper(orgA) + `"}`,
		`{"USER_ID":"` + bob + `","org_id":"` + orgA + `"}`,
		`{"user_id":"` + dave + `","org_id":"` + orgA + `","user_id":"` + bob + `"}`,
	} {
		req, _ := http.NewRequest("POST", c.URL(0)+"/admin/v1/memberships", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("POST /memberships %s: got %d, want 422: %s", body, resp.StatusCode, raw)
		}
	}
	outOfSight("after the attempts")

	// 5. The way in is Bob's own: an invitation he accepts by signing in.
	var inv map[string]any
	if st, raw := call(1, "POST", "/invitations", map[string]any{"email": bobAddr, "organization_id": orgA}); st != http.StatusCreated {
		t.Fatalf("invite Bob: %d %s", st, raw)
	} else {
		json.Unmarshal(raw, &inv)
	}
	outOfSight("invited, not yet accepted")
	m := pm.await(t, bobAddr, "invitation")
	ib := testcluster.NewBrowser(t)
	page := ib.Get(onNode(c, 2, m.Link))
	wantPage(t, page, http.StatusOK, "Sign in to accept the invitation")
	confirm := ib.Submit(page, map[string]string{"email": bobAddr, "password": bobPW}, "method", "password")
	wantPage(t, confirm, http.StatusOK, "You are invited to join Acme as "+bobAddr)
	wantPage(t, ib.Submit(confirm, nil, "", ""), http.StatusOK, "You joined Acme")
	if st, raw := call(0, "GET", "/users/"+bob, nil); st != http.StatusOK {
		t.Errorf("Bob, a member of A by his own acceptance: GET %d %s", st, raw)
	}
	if st, raw := call(0, "PATCH", "/users/"+bob, map[string]any{"phone": "+15550100042"}); st != http.StatusForbidden {
		t.Errorf("Bob, also B's: PATCH %d %s, want 403", st, raw)
	}
}
