package docs_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/docs"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// exchange is one request and its answer, as the client saw them.
type exchange struct {
	method, path string // path without the query
	req          *http.Request
	reqBody      []byte
	resp         *http.Response
	respBody     []byte
}

// recorder is a RoundTripper that keeps every exchange.
type recorder struct {
	mu   sync.Mutex
	next http.RoundTripper
	log  []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	r.mu.Lock()
	r.log = append(r.log, exchange{method: req.Method, path: req.URL.Path, req: req.Clone(req.Context()), reqBody: body, resp: resp, respBody: rb})
	r.mu.Unlock()
	return resp, nil
}

// api is a client of the admin API that records through rec.
type api struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (a api) call(method, path string, body any, want int) map[string]any {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+"/admin/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// TestOpenAPIDocumentsMatchTheNode drives every operation of both
// documents against a real node, through a recording client, and checks
// each request and answer with libopenapi-validator; then that every
// operation of the documents was seen, and that the node serves both
// documents as the repository has them.
func TestOpenAPIDocumentsMatchTheNode(t *testing.T) {
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.EmailOutbox = outbox // mail on: invitations and address checks are sent
	}})
	rec := &recorder{next: c.Client().Transport}
	if rec.next == nil {
		rec.next = http.DefaultTransport
	}
	hc := &http.Client{Transport: rec, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a := api{t: t, base: c.URL(0), hc: hc}

	// ---- the admin API, every route ----
	org := a.call("POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, 201)
	org2 := a.call("POST", "/organizations", map[string]any{"slug": "beta", "name": "Beta"}, 201)
	a.call("POST", "/organizations", map[string]any{"slug": "Not A Slug"}, 400)
	a.call("GET", "/organizations", nil, 200)
	a.call("GET", "/organizations/"+org["id"].(string), nil, 200)
	a.call("GET", "/organizations/00000000-0000-4000-8000-000000000000", nil, 404)
	user := a.call("POST", "/users", map[string]any{"email": "ann@example.com", "email_verified": true, "password": "correct horse battery"}, 201)
	uid := user["id"].(string)
	a.call("POST", "/users", map[string]any{"email": "ann@example.com"}, 409)
	a.call("GET", "/users?page=1&page_size=10", nil, 200)
	a.call("GET", "/users?email=ann@example.com", nil, 200)
	a.call("GET", "/users/"+uid, nil, 200)
	a.call("PATCH", "/users/"+uid, map[string]any{"phone": "+15551234567"}, 200)
	a.call("POST", "/users/import", map[string]any{"users": []map[string]any{
		{"email": "imp@example.com", "password_hash": "$2b$04$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS", "organizations": []string{org["id"].(string)}},
		{"email": "bad@example.com", "password_hash": "$1$x$y"}}}, 200)
	a.call("POST", "/users/"+uid+"/totp", nil, 201)
	a.call("GET", "/users/"+uid+"/factors", nil, 200)
	a.call("POST", "/users/"+uid+"/recovery-codes", nil, 201)
	a.call("DELETE", "/users/"+uid+"/totp", nil, 204)
	a.call("DELETE", "/users/"+uid+"/lockouts", nil, 204)
	a.call("GET", "/lockouts", nil, 200)
	a.call("DELETE", "/lockouts/password:nobody", nil, 404)
	m := a.call("POST", "/memberships", map[string]any{"user_id": uid, "org_id": org["id"]}, 201)
	a.call("POST", "/memberships", map[string]any{"user_id": uid, "org_id": "00000000-0000-4000-8000-000000000000"}, 422)
	a.call("GET", "/memberships?user_id="+uid, nil, 200)
	a.call("GET", "/memberships/"+m["id"].(string), nil, 200)
	a.call("PATCH", "/memberships/"+m["id"].(string), map[string]any{"status": "active"}, 200)
	m2 := a.call("POST", "/memberships", map[string]any{"user_id": uid, "org_id": org2["id"]}, 201)
	a.call("DELETE", "/memberships/"+m2["id"].(string), nil, 204)
	inv := a.call("POST", "/invitations", map[string]any{"email": "inv@example.com", "organization_id": org["id"], "expires_in": 86400}, 201)
	a.call("POST", "/invitations", map[string]any{"email": "Inv <inv@example.com>", "organization_id": org["id"]}, 400)
	a.call("POST", "/invitations", map[string]any{"email": "de@example.com", "organization_id": org["id"], "locale": "de"}, 201)
	a.call("POST", "/invitations", map[string]any{"email": "ko@example.com", "organization_id": org["id"], "locale": "ko"}, 400)
	a.call("POST", "/invitations", map[string]any{"email": "ann@example.com", "organization_id": org["id"]}, 409)
	a.call("POST", "/invitations", map[string]any{"email": "inv@example.com", "organization_id": "00000000-0000-4000-8000-000000000000"}, 422)
	a.call("GET", "/invitations", nil, 200)
	a.call("GET", "/invitations?organization_id="+org["id"].(string)+"&status=pending&page_size=5", nil, 200)
	a.call("GET", "/invitations/"+inv["id"].(string), nil, 200)
	a.call("DELETE", "/invitations/"+inv["id"].(string), nil, 204)
	a.call("DELETE", "/invitations/"+inv["id"].(string), nil, 404)
	a.call("POST", "/users/"+uid+"/verify-email", nil, 202)
	a.call("POST", "/users/"+uid+"/verify-email", map[string]any{"locale": "ja"}, 202)
	a.call("POST", "/users/"+uid+"/verify-email", map[string]any{"locale": "ja-JP"}, 400)
	a.call("POST", "/users/00000000-0000-4000-8000-000000000000/verify-email", nil, 404)
	a.call("PATCH", "/organizations/"+org["id"].(string), map[string]any{"name": "Alpha Inc.",
		"registration": map[string]any{"enabled": true, "email_domains": []string{"alpha.example", "Bücher.example."}}}, 200)
	a.call("PATCH", "/organizations/"+org["id"].(string), map[string]any{"registration": map[string]any{"enabled": true, "email_domains": []string{}}}, 400)
	a.call("PATCH", "/organizations/00000000-0000-4000-8000-000000000000", map[string]any{"name": "Nobody"}, 404)
	const pngLogo = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
	a.call("PUT", "/branding", map[string]any{"display_name": "Example Sign-in", "logo": pngLogo, "primary_color": "#005A9C",
		"support_url": "https://help.example.com/", "support_email": "help@example.com"}, 200)
	a.call("PUT", "/branding", map[string]any{"primary_color": "#777777"}, 400)
	a.call("GET", "/branding", nil, 200)
	a.call("PATCH", "/organizations/"+org["id"].(string), map[string]any{"branding": map[string]any{"display_name": "Alpha", "primary_color": "#1a1a1a"}}, 200)
	a.call("PATCH", "/organizations/"+org["id"].(string), map[string]any{"branding": map[string]any{"logo": "data:image/svg+xml;base64,PHN2Zz48c2NyaXB0Lz48L3N2Zz4="}}, 400)
	const cb = "http://127.0.0.1:9/callback"
	cl := a.call("POST", "/clients", map[string]any{"name": "App", "redirect_uris": []string{cb}, "scopes": []string{"openid", "email"}, "organization_id": org["id"]}, 201)
	cid, secret := cl["client_id"].(string), cl["client_secret"].(string)
	a.call("GET", "/clients", nil, 200)
	a.call("GET", "/clients/"+url.PathEscape(cid), nil, 200)
	a.call("PATCH", "/clients/"+url.PathEscape(cid), map[string]any{"name": "The App"}, 200)
	gone := a.call("POST", "/clients", map[string]any{"name": "Gone", "type": "public", "redirect_uris": []string{cb}, "organization_id": org["id"]}, 201)
	a.call("DELETE", "/clients/"+url.PathEscape(gone["client_id"].(string)), nil, 204)
	a.call("GET", "/keys", nil, 200)
	a.call("POST", "/keys/rotate", map[string]any{}, 201)
	d := a.call("POST", "/directories", map[string]any{"name": "Nowhere", "url": "ldaps://127.0.0.1:1", "bind_dn": "cn=x,dc=example", "bind_password": "x",
		"user_base": "dc=example", "user_filter": "(mail=%s)", "id_attribute": "entryUUID"}, 201)
	a.call("GET", "/directories", nil, 200)
	a.call("GET", "/directories/"+d["id"].(string), nil, 200)
	a.call("PATCH", "/directories/"+d["id"].(string), map[string]any{"sync_interval": "1h"}, 200)
	a.call("DELETE", "/directories/"+d["id"].(string), nil, 204)
	identityProviderCalls(t, a, org["id"].(string), uid)
	grant := a.call("POST", "/admins", map[string]any{"user_id": uid, "role": "org_admin", "organization_id": org["id"]}, 201)
	a.call("POST", "/admins", map[string]any{"user_id": uid, "role": "org_admin", "organization_id": org2["id"]}, 409)
	a.call("POST", "/admins", map[string]any{"user_id": "00000000-0000-4000-8000-000000000000", "role": "auditor"}, 422)
	a.call("POST", "/admins", map[string]any{"user_id": uid, "role": "root"}, 400)
	a.call("GET", "/admins", nil, 200)
	a.call("DELETE", "/admins/"+grant["id"].(string), nil, 204)
	a.call("DELETE", "/admins/"+grant["id"].(string), nil, 404)
	key := a.call("POST", "/api-keys", map[string]any{"name": "ci", "role": "auditor", "expires_in": 3600}, 201)
	a.call("POST", "/api-keys", map[string]any{"name": "ci", "role": "auditor", "expires_in": 0}, 400)
	a.call("POST", "/api-keys", map[string]any{"name": "o", "role": "org_admin", "organization_id": "00000000-0000-4000-8000-000000000000", "expires_in": 60}, 422)
	a.call("GET", "/api-keys", nil, 200)
	withKey, _ := http.NewRequest("GET", c.URL(0)+"/admin/v1/api-keys", nil)
	withKey.Header.Set("Authorization", "Bearer "+key["key"].(string))
	if resp, err := hc.Do(withKey); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api-keys with the API key: %v %v", resp, err)
	}
	a.call("DELETE", "/api-keys/"+key["id"].(string), nil, 204)
	if resp, err := hc.Do(withKey); err != nil || resp.StatusCode != 401 {
		t.Fatalf("GET /api-keys with the deleted key: %v %v", resp, err)
	}
	a.call("DELETE", "/api-keys/"+key["id"].(string), nil, 404)
	a.call("DELETE", "/organizations/"+org2["id"].(string), nil, 204)
	imp := a.call("GET", "/users?email=imp@example.com", nil, 200)["data"].([]any)[0].(map[string]any)
	a.call("DELETE", "/users/"+imp["id"].(string), nil, 204)
	a.call("GET", "/cluster", nil, 200)
	a.call("DELETE", "/cluster/nodes/no-such-node", nil, 404)
	a.call("POST", "/cluster/members/no-such-node/promote", nil, 404)
	a.call("POST", "/cluster/members/no-such-node/demote", nil, 404)
	a.call("GET", "/status", nil, 200)
	a.call("GET", "/audit?limit=5", nil, 200)
	a.call("GET", "/audit/verify", nil, 200)
	a.call("GET", "/snapshot", nil, 200)
	restore, _ := http.NewRequest("POST", c.URL(0)+"/admin/v1/snapshot", strings.NewReader("not a backup"))
	restore.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	restore.Header.Set("Content-Type", "application/octet-stream")
	if resp, err := hc.Do(restore); err != nil || resp.StatusCode != 400 {
		t.Fatalf("restore of junk: %v %v", resp, err)
	}
	noToken, _ := http.NewRequest("GET", c.URL(0)+"/admin/v1/users", nil)
	if resp, err := hc.Do(noToken); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	}
	// Last of the admin calls: the test's admin token stops working.
	a.call("POST", "/admin-token", nil, 201)
	for _, p := range []string{"/admin/v1/openapi.json", "/openapi.json"} {
		resp, err := hc.Get(c.URL(0) + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", p, resp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if want := map[string][]byte{"/openapi.json": docs.OIDC, "/admin/v1/openapi.json": docs.Admin}[p]; !bytes.Equal(b, want) {
			t.Fatalf("GET %s does not serve the repository's document", p)
		}
	}

	// ---- the relying-party surface: a whole sign-in and what follows ----
	ctx := gooidc.ClientContext(t.Context(), hc)
	prov, err := gooidc.NewProvider(ctx, c.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	hc.Get(c.URL(0) + "/.well-known/jwks.json")
	hc.Get(c.URL(0) + "/healthz")
	hc.Get(c.URL(0) + "/readyz")
	oc := oauth2.Config{ClientID: cid, ClientSecret: secret, Endpoint: prov.Endpoint(), RedirectURL: cb, Scopes: []string{"openid", "email"}}
	b := testcluster.NewBrowser(t)
	b.Client.Transport = rec
	verifier := oauth2.GenerateVerifier()
	page := b.Follow(b.Get(oc.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier), gooidc.Nonce("nonce-0123456789"))), c.Issuer())
	for i := 0; i < 4 && page.Location() == ""; i++ {
		switch {
		case strings.Contains(page.Body, `name="password"`):
			page = b.Submit(page, map[string]string{"email": "ann@example.com", "password": "correct horse battery"}, "method", "password")
		case strings.Contains(page.Body, `value="allow"`):
			page = b.Submit(page, nil, "decision", "allow")
		default:
			t.Fatalf("unexpected page %d:\n%s", page.Status, page.Body)
		}
		page = b.Follow(page, c.Issuer())
	}
	loc, _ := url.Parse(page.Location())
	tok, err := oc.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prov.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err != nil {
		t.Fatal(err)
	}
	bearer := func(method, path, token string) {
		req, _ := http.NewRequest(method, c.URL(0)+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	bearer("POST", "/userinfo", tok.AccessToken)
	bearer("GET", "/userinfo", "not-a-token")
	bearer("GET", "/api/v1/me/memberships?page_size=5", tok.AccessToken)
	bearer("GET", "/api/v1/me/memberships", "not-a-token")
	form := func(path string, v url.Values, auth bool) {
		req, _ := http.NewRequest("POST", c.URL(0)+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth {
			req.SetBasicAuth(url.QueryEscape(cid), url.QueryEscape(secret))
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	form("/oauth2/introspect", url.Values{"token": {tok.AccessToken}}, true)
	form("/oauth2/introspect", url.Values{"token": {tok.AccessToken}}, false)
	form("/oauth2/revoke", url.Values{"token": {tok.AccessToken}}, true)
	form("/oauth2/token", url.Values{"grant_type": {"password"}}, true)
	if _, err := oc.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("a replayed code was exchanged")
	}
	idt, _ := tok.Extra("id_token").(string)
	hc.Get(c.URL(0) + "/authorize/organization")
	hc.Get(c.URL(0) + "/account")
	form("/account", url.Values{}, false)
	b.Get(c.URL(0) + "/logout?" + url.Values{"id_token_hint": {idt}, "post_logout_redirect_uri": {cb}, "state": {"s"}}.Encode())
	form("/logout", url.Values{"id_token_hint": {"junk"}}, false)

	// ---- check every exchange against its document ----
	oidcV := newValidator(t, docs.OIDC, "")
	adminV := newValidator(t, docs.Admin, "/admin/v1")
	seen := map[string]bool{}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, x := range rec.log {
		v, doc := oidcV, "oidc"
		if strings.HasPrefix(x.path, "/admin/v1/") {
			v, doc = adminV, "admin"
		}
		if strings.HasPrefix(x.path, "/static/") {
			continue
		}
		op := v.operation(x.method, x.path)
		if op == "" {
			t.Errorf("%s %s (%d): not in the %s document", x.method, x.path, x.resp.StatusCode, doc)
			continue
		}
		seen[doc+" "+op] = true
		for _, e := range checkExchange(v, x) {
			t.Errorf("%s %s (%d) against the %s document: %s", x.method, x.path, x.resp.StatusCode, doc, e)
		}
	}
	for _, v := range []*docValidator{oidcV, adminV} {
		for _, op := range v.ops {
			name := map[*docValidator]string{oidcV: "oidc", adminV: "admin"}[v] + " " + op.method + " " + op.template
			if !seen[name] {
				t.Errorf("%s: never exercised", name)
			}
		}
	}
}

// docValidator is one document: its validator and its operations.
type docValidator struct {
	v      validator.Validator
	prefix string
	ops    []docOp
}

type docOp struct {
	method, template string
	re               *regexp.Regexp
}

func newValidator(t *testing.T, spec []byte, prefix string) *docValidator {
	t.Helper()
	// The validator matches paths against the servers' paths: give it the
	// document with a plain "/" server, and paths without the prefix.
	var raw map[string]any
	if err := json.Unmarshal(spec, &raw); err != nil {
		t.Fatal(err)
	}
	raw["servers"] = []map[string]string{{"url": "/"}}
	patched, _ := json.Marshal(raw)
	doc, err := libopenapi.NewDocument(patched)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("the document is not valid OpenAPI: %s: %s", e.Message, e.Reason)
		}
	}
	dv := &docValidator{v: v, prefix: prefix}
	paths, _ := raw["paths"].(map[string]any)
	var templates []string
	for p := range paths {
		templates = append(templates, p)
	}
	sort.Strings(templates)
	for _, p := range templates {
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllString(regexp.QuoteMeta(prefix+p), `[^/]+`) + "$")
		for m := range paths[p].(map[string]any) {
			dv.ops = append(dv.ops, docOp{method: strings.ToUpper(m), template: p, re: re})
		}
	}
	return dv
}

// operation names the document's operation of a request: "" when none.
// A literal path wins over a template (/users/import over /users/{id}).
func (d *docValidator) operation(method, path string) string {
	best := ""
	for _, op := range d.ops {
		if op.method == method && op.re.MatchString(path) && (best == "" || !strings.Contains(op.template, "{")) {
			best = op.method + " " + op.template
		}
	}
	return best
}

// checkExchange validates one recorded exchange against v and returns
// what does not match, a line each. A request refused on purpose (bad
// input, no token) is not one the document allows: only its answer is
// checked.
func checkExchange(v *docValidator, x exchange) []string {
	req := x.req.Clone(x.req.Context())
	req.Body = io.NopCloser(bytes.NewReader(x.reqBody))
	req.URL.Path = strings.TrimPrefix(req.URL.Path, v.prefix)
	resp := *x.resp
	resp.Body = io.NopCloser(bytes.NewReader(x.respBody))
	check := v.v.ValidateHttpRequestResponse
	if x.resp.StatusCode >= 400 {
		check = v.v.ValidateHttpResponse
	}
	var out []string
	if ok, errs := check(req, &resp); !ok {
		for _, e := range errs {
			out = append(out, e.Message+": "+e.Reason)
			for _, se := range e.SchemaValidationErrors {
				out = append(out, "    "+se.FieldPath+": "+se.Reason)
			}
		}
	}
	return out
}
