package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestClientRateLimitOnTheClientsPage: the clients page sets a client's
// own rate limit on creation and on its row, shows it, refuses a bad one
// with the admin API's detail, and an empty one goes back to the node's.
func TestClientRateLimitOnTheClientsPage(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	org := firstOrg(t, e.state)
	form := func(id, typ, limit string) url.Values {
		return url.Values{"name": {"App " + id}, "type": {typ}, "organization_id": {org.ID}, "client_id": {id},
			"redirect_uris": {"https://app.example/cb"}, "scopes": {"openid"}, "rate_limit": {limit}}
	}

	r := e.get(Prefix + "clients")
	wantBody(t, "clients page", r, `<label for="c-rate">Rate limit</label>`, `name="rate_limit"`)

	r = e.post(Prefix+"clients", form("busy", "confidential", "600/60s"))
	wantStatus(t, "create", r, http.StatusCreated)
	wantBody(t, "create", r, "<dt>Rate limit</dt><dd><code>600/60s</code></dd>")
	if cl, err := e.state.Client("busy"); err != nil || cl.RateLimit != "600/60s" {
		t.Fatalf("stored: got %q, %v, want 600/60s", cl.RateLimit, err)
	}
	r = e.post(Prefix+"clients", form("plain", "confidential", ""))
	wantStatus(t, "create without", r, http.StatusCreated)
	wantBody(t, "create without", r, "<dt>Rate limit</dt><dd>the node's default</dd>")
	r = e.post(Prefix+"clients", form("bad", "confidential", "lots"))
	wantStatus(t, "create with a bad one", r, http.StatusBadRequest)
	wantBody(t, "create with a bad one", r, "N/duration")
	r = e.post(Prefix+"clients", form("spa", "public", "600/60s"))
	wantStatus(t, "public with one", r, http.StatusBadRequest)
	wantBody(t, "public with one", r, "only a confidential client")
	wantStatus(t, "public", e.post(Prefix+"clients", form("spa", "public", "")), http.StatusCreated)

	r = e.get(Prefix + "clients")
	wantBody(t, "list", r, `<th scope="col">Rate limit</th>`, `action="/console/clients/busy/rate-limit"`,
		`id="rl-busy" name="rate_limit"`, `value="600/60s"`, `action="/console/clients/plain/rate-limit"`)
	if strings.Contains(r.Body, `action="/console/clients/spa/rate-limit"`) {
		t.Errorf("list: a public client's row offers a rate limit")
	}

	for _, s := range []struct {
		name, id, limit string
		status          int
		stored          string
	}{
		{"raise", "plain", "20/1m", http.StatusSeeOther, "20/1m"},
		{"bad", "plain", "20 a minute", http.StatusBadRequest, "20/1m"},
		{"back to the default", "busy", " ", http.StatusSeeOther, ""},
	} {
		r := e.post(Prefix+"clients/"+s.id+"/rate-limit", url.Values{"rate_limit": {s.limit}})
		wantStatus(t, s.name, r, s.status)
		if s.status == http.StatusBadRequest {
			wantBody(t, s.name, r, "rate_limit: must be N/duration")
		} else if r.Location != Prefix+"clients?done=client-updated" {
			t.Errorf("%s: got to %q", s.name, r.Location)
		}
		if cl, _ := e.state.Client(s.id); cl.RateLimit != s.stored {
			t.Errorf("%s: stored %q, want %q", s.name, cl.RateLimit, s.stored)
		}
	}
}
