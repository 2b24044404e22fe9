package oidc

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// Origins of the CORS tests. The harness's public clients redirect to
// hRedirect and hLoopback, so by default they list appOrigin and
// loopOrigin.
const (
	appOrigin  = "https://app.example"
	loopOrigin = "http://127.0.0.1:9999"
	spaOrigin  = "https://spa.example" // hSiblingApp's, named explicitly
	evilOrigin = "https://evil.example"
)

// newCORSHarness is the harness at the current state format, with
// hSiblingApp (confidential) listing spaOrigin and hMulti (public) an
// explicit empty list: hPublic keeps its default origins, hConfidential
// its default none.
func newCORSHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	h := newHarness(t, opts...)
	if err := h.applier.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.WebOrigins, c.WebOriginsSet = []string{spaOrigin}, true })
	bcSetClient(t, h, hMulti, func(c *fsm.Client) { c.WebOrigins, c.WebOriginsSet = nil, true })
	return h
}

// corsWant is what an answer's CORS headers must be.
type corsWant struct {
	origin string // Access-Control-Allow-Origin; "" none
	vary   bool   // Vary: Origin
}

// checkCORS checks rec's CORS headers against want; preflight says which
// grant headers come with the origin (a public document's answer, "*",
// exposes no header). No answer ever carries
// Access-Control-Allow-Credentials.
func checkCORS(t *testing.T, rec *httptest.ResponseRecorder, want corsWant, preflight bool) {
	t.Helper()
	h := rec.Header()
	if v, ok := h["Access-Control-Allow-Credentials"]; ok {
		t.Errorf("Access-Control-Allow-Credentials: got %q, want none", v)
	}
	if got := h.Values("Access-Control-Allow-Origin"); !slices.Equal(got, nonEmpty(want.origin)) {
		t.Errorf("Access-Control-Allow-Origin: got %q, want %q", got, want.origin)
	}
	if got := slices.Contains(h.Values("Vary"), "Origin"); got != want.vary {
		t.Errorf("Vary: got %q, want Origin %v", h.Values("Vary"), want.vary)
	}
	granted := want.origin != ""
	for name, val := range map[string]string{
		"Access-Control-Allow-Headers":  "authorization, content-type, x-correlation-id",
		"Access-Control-Max-Age":        "600",
		"Access-Control-Expose-Headers": "WWW-Authenticate, X-Correlation-ID, Retry-After",
	} {
		wantVal := ""
		expose := name == "Access-Control-Expose-Headers"
		if granted && expose != preflight && !(expose && want.origin == "*") {
			wantVal = val
		}
		if got := h.Get(name); got != wantVal {
			t.Errorf("%s: got %q, want %q", name, got, wantVal)
		}
	}
	if !granted || !preflight {
		if got := h.Get("Access-Control-Allow-Methods"); got != "" {
			t.Errorf("Access-Control-Allow-Methods: got %q, want none", got)
		}
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// corsPreflight sends OPTIONS path from origin asking for method ("" for
// either: a plain OPTIONS).
func corsPreflight(t testing.TB, h *harness, path, origin, method string) *httptest.ResponseRecorder {
	t.Helper()
	hdr := map[string]string{}
	if origin != "" {
		hdr["Origin"] = origin
	}
	if method != "" {
		hdr["Access-Control-Request-Method"] = method
		hdr["Access-Control-Request-Headers"] = "authorization, content-type"
	}
	return bcDo(t, h, bcReq{method: http.MethodOptions, path: path, header: hdr})
}

func TestCORSPreflight(t *testing.T) {
	h := newCORSHarness(t)
	for _, tt := range []struct {
		name, path, origin, method string
		status                     int
		want                       corsWant
		methods                    string // Access-Control-Allow-Methods when granted
	}{
		{"token, a public client's default origin", PathToken, appOrigin, "POST", 204, corsWant{appOrigin, true}, "POST"},
		{"token, a public client's loopback origin", PathToken, loopOrigin, "POST", 204, corsWant{loopOrigin, true}, "POST"},
		{"token, a confidential client's explicit origin", PathToken, spaOrigin, "POST", 204, corsWant{spaOrigin, true}, "POST"},
		{"token, an origin no client lists", PathToken, evilOrigin, "POST", 204, corsWant{"", true}, ""},
		{"token, a method it does not serve", PathToken, appOrigin, "GET", 204, corsWant{"", true}, ""},
		{"token, a plain OPTIONS", PathToken, appOrigin, "", 204, corsWant{"", true}, ""},
		{"token, no Origin", PathToken, "", "POST", 204, corsWant{"", true}, ""},
		{"token, the null origin", PathToken, "null", "POST", 204, corsWant{"", true}, ""},
		{"token, an origin as no browser writes it", PathToken, "https://APP.example", "POST", 204, corsWant{"", true}, ""},
		{"userinfo GET", PathUserinfo, appOrigin, "GET", 204, corsWant{appOrigin, true}, "GET"},
		{"userinfo POST", PathUserinfo, spaOrigin, "POST", 204, corsWant{spaOrigin, true}, "POST"},
		{"userinfo, unlisted", PathUserinfo, evilOrigin, "GET", 204, corsWant{"", true}, ""},
		{"memberships GET", PathMemberships, loopOrigin, "GET", 204, corsWant{loopOrigin, true}, "GET"},
		{"memberships POST", PathMemberships, appOrigin, "POST", 204, corsWant{"", true}, ""},
		{"introspect never", PathIntrospect, appOrigin, "POST", 405, corsWant{}, ""},
		{"revoke never", PathRevoke, spaOrigin, "POST", 405, corsWant{}, ""},
		{"discovery, any origin", PathDiscovery, evilOrigin, "GET", 204, corsWant{"*", false}, "GET, HEAD"},
		{"discovery, no Origin", PathDiscovery, "", "GET", 204, corsWant{"*", false}, "GET, HEAD"},
		{"discovery, not GET", PathDiscovery, appOrigin, "POST", 204, corsWant{}, ""},
		{"jwks, any origin", PathJWKS, evilOrigin, "GET", 204, corsWant{"*", false}, "GET, HEAD"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := corsPreflight(t, h, tt.path, tt.origin, tt.method)
			if rec.Code != tt.status {
				t.Fatalf("status: got %d, want %d", rec.Code, tt.status)
			}
			checkCORS(t, rec, tt.want, true)
			if got := rec.Header().Get("Access-Control-Allow-Methods"); got != tt.methods {
				t.Errorf("Access-Control-Allow-Methods: got %q, want %q", got, tt.methods)
			}
			if rec.Code == 204 && rec.Header().Get("Allow") == "" {
				t.Errorf("Allow: got none, want the methods")
			}
		})
	}
}

func TestCORSTokenEndpoint(t *testing.T) {
	h := newCORSHarness(t)
	badCode := bcTokenForm("no-such-code")
	for _, tt := range []struct {
		name   string
		req    bcReq
		origin string
		status int
		want   corsWant
	}{
		{"public client, default origin, tokens", bcReq{form: bcWith(bcTokenForm(h.signedInCode(hPublic, hUser, hOrgA, benchScopes, "", bcVerifier)), "client_id", hPublic)},
			appOrigin, 200, corsWant{appOrigin, true}},
		{"public client, unlisted origin, tokens", bcReq{form: bcWith(bcTokenForm(h.signedInCode(hPublic, hUser, hOrgA, benchScopes, "", bcVerifier)), "client_id", hPublic)},
			evilOrigin, 200, corsWant{"", true}},
		{"public client, no Origin", bcReq{form: bcWith(badCode, "client_id", hPublic)}, "", 400, corsWant{"", true}},
		{"public client, invalid_grant", bcReq{form: bcWith(badCode, "client_id", hPublic)}, loopOrigin, 400, corsWant{loopOrigin, true}},
		{"another client's origin", bcReq{form: bcWith(badCode, "client_id", hPublic)}, spaOrigin, 400, corsWant{"", true}},
		{"explicit empty list, origin its redirects would give", bcReq{form: bcWith(badCode, "client_id", hMulti)}, appOrigin, 400, corsWant{"", true}},
		{"confidential client, none by default", bcReq{form: badCode, user: hConfidential, pass: hSecret}, appOrigin, 400, corsWant{"", true}},
		{"confidential client, explicit origin, wrong secret (Basic)", bcReq{form: badCode, user: hSiblingApp, pass: "wrong"}, spaOrigin, 401, corsWant{spaOrigin, true}},
		{"confidential client, explicit origin, wrong secret (post)", bcReq{form: bcWith(badCode, "client_id", hSiblingApp, "client_secret", "wrong")}, spaOrigin, 401, corsWant{spaOrigin, true}},
		{"confidential client, explicit origin, right secret", bcReq{form: badCode, user: hSiblingApp, pass: hSiblingSec}, spaOrigin, 400, corsWant{spaOrigin, true}},
		{"named by Basic, body not a form", bcReq{body: new(string), contentType: "text/plain", user: hSiblingApp, pass: hSiblingSec}, spaOrigin, 400, corsWant{spaOrigin, true}},
		{"unknown client", bcReq{form: bcWith(badCode, "client_id", "nobody")}, appOrigin, 401, corsWant{"", true}},
		{"the built-in client", bcReq{form: bcWith(badCode, "client_id", AdminClientID)}, appOrigin, 400, corsWant{"", true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.req
			r.method, r.path = http.MethodPost, PathToken
			if tt.origin != "" {
				r.header = map[string]string{"Origin": tt.origin}
			}
			rec := bcDo(t, h, r)
			if rec.Code != tt.status {
				t.Fatalf("status: got %d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			checkCORS(t, rec, tt.want, false)
		})
	}
}

// TestCORSRateLimited: the limiter answers before the client is read,
// and its 429 is granted to the named client's origin all the same.
func TestCORSRateLimited(t *testing.T) {
	h := newCORSHarness(t, func(c *Config) { c.RateLimit = "1/60s" })
	for _, tt := range []struct {
		name, origin string
		want         corsWant
	}{
		{"listed", appOrigin, corsWant{appOrigin, true}},
		{"unlisted", evilOrigin, corsWant{"", true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := bcReq{method: http.MethodPost, path: PathToken, form: bcWith(bcTokenForm("no-such-code"), "client_id", hPublic),
				header: map[string]string{"Origin": tt.origin}, remote: "192.0.2.7:1"}
			if tt.name == "unlisted" {
				r.remote = "192.0.2.8:1"
			}
			bcDo(t, h, r)
			rec := bcDo(t, h, r)
			if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("second request: got %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
			}
			checkCORS(t, rec, tt.want, false)
		})
	}
}

func TestCORSBearerEndpoints(t *testing.T) {
	h := newCORSHarness(t)
	public := bcTokens(t, h, hPublic, "", "openid", "email").AccessToken
	multi := bcTokens(t, h, hMulti, "", "openid").AccessToken
	sibling := bcTokens(t, h, hSiblingApp, hSiblingSec, "openid").AccessToken
	revoked := bcTokens(t, h, hSiblingApp, hSiblingSec, "openid").AccessToken
	if rec := bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: hSiblingApp, pass: hSiblingSec, form: url.Values{"token": {revoked}}}); rec.Code != 200 {
		t.Fatalf("revoke: got %d", rec.Code)
	}
	type row struct {
		name, method, path, bearer, origin string
		status                             int
		want                               corsWant
	}
	rows := []row{}
	for _, ep := range []struct{ method, path string }{{"GET", PathUserinfo}, {"POST", PathUserinfo}, {"GET", PathMemberships}} {
		pre := ep.method + " " + ep.path + ": "
		rows = append(rows,
			row{pre + "the token's client lists the origin", ep.method, ep.path, public, appOrigin, 200, corsWant{appOrigin, true}},
			row{pre + "explicit origin of a confidential client", ep.method, ep.path, sibling, spaOrigin, 200, corsWant{spaOrigin, true}},
			row{pre + "unlisted origin", ep.method, ep.path, public, evilOrigin, 200, corsWant{"", true}},
			row{pre + "another client's origin", ep.method, ep.path, public, spaOrigin, 200, corsWant{"", true}},
			row{pre + "explicit empty list", ep.method, ep.path, multi, appOrigin, 200, corsWant{"", true}},
			row{pre + "no Origin", ep.method, ep.path, public, "", 200, corsWant{"", true}},
			row{pre + "revoked token, 401", ep.method, ep.path, revoked, spaOrigin, 401, corsWant{spaOrigin, true}},
			row{pre + "revoked token, another origin", ep.method, ep.path, revoked, appOrigin, 401, corsWant{"", true}},
			row{pre + "no token of ours, 401", ep.method, ep.path, "garbage", appOrigin, 401, corsWant{"", true}},
		)
	}
	rows = append(rows, row{"memberships, 400 after the bearer", "GET", PathMemberships + "?page=0", public, appOrigin, 400, corsWant{appOrigin, true}})
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			r := bcReq{method: tt.method, path: tt.path, bearer: tt.bearer}
			if tt.origin != "" {
				r.header = map[string]string{"Origin": tt.origin}
			}
			rec := bcDo(t, h, r)
			if rec.Code != tt.status {
				t.Fatalf("status: got %d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			checkCORS(t, rec, tt.want, false)
		})
	}
	t.Run("expired token, 401", func(t *testing.T) {
		h.clock.Add(time.Hour) // past the 600 s access token, the app session still stored
		for _, path := range []string{PathUserinfo, PathMemberships} {
			rec := bcDo(t, h, bcReq{method: "GET", path: path, bearer: public, header: map[string]string{"Origin": appOrigin}})
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("%s: got %d, want 401", path, rec.Code)
			}
			checkCORS(t, rec, corsWant{appOrigin, true}, false)
		}
	})
}

// TestCORSNeverThere: introspection and revocation answer no CORS header
// at all, whatever the origin; discovery and the key set grant every GET
// to any origin.
func TestCORSNeverThere(t *testing.T) {
	h := newCORSHarness(t)
	tok := bcTokens(t, h, hPublic, "", "openid").AccessToken
	for _, path := range []string{PathIntrospect, PathRevoke} {
		for _, origin := range []string{appOrigin, spaOrigin} {
			rec := bcDo(t, h, bcReq{method: "POST", path: path, user: hSiblingApp, pass: hSiblingSec,
				form: url.Values{"token": {tok}}, header: map[string]string{"Origin": origin}})
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: got %d, want 200", path, rec.Code)
			}
			for k := range rec.Header() {
				if strings.HasPrefix(k, "Access-Control-") || k == "Vary" {
					t.Errorf("%s from %s: got %s, want no CORS header", path, origin, k)
				}
			}
		}
	}
	pub := func(path string, handler http.Handler) {
		for _, origin := range []string{evilOrigin, ""} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			checkCORS(t, rec, corsWant{"*", false}, false)
		}
	}
	pub(PathDiscovery, DiscoveryHandler(h.p.cfg.Issuer))
	pub(PathJWKS, JWKSHandler(h.keys, nil))
	m, _ := newKeys(t) // no key yet: 503, still readable by a page
	pub(PathJWKS, JWKSHandler(m, nil))
}

// TestCORSFollowsClients: the index follows every client change, both
// unwired (by the applied index) and wired into OnApply (by the client
// commands alone, so other writes leave it as built).
func TestCORSFollowsClients(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		name := "by the applied index"
		if hooked {
			name = "through OnApply"
		}
		t.Run(name, func(t *testing.T) {
			h := newCORSHarness(t)
			if hooked {
				h.applier.FSM.OnApply = h.p.OnApply
				h.p.OnApply(nil) // as the first batch applied does
			}
			granted := func(origin string) bool {
				t.Helper()
				return corsPreflight(t, h, PathToken, origin, "POST").Header().Get("Access-Control-Allow-Origin") == origin
			}
			const newOrigin = "https://new.example"
			if !granted(appOrigin) || granted(newOrigin) {
				t.Fatalf("before: got %v %v, want app listed and new not", granted(appOrigin), granted(newOrigin))
			}
			if hooked {
				before := h.p.origins.current()
				h.signedInCode(hPublic, hUser, hOrgA, benchScopes, "", bcVerifier)
				if after := h.p.origins.current(); after != before {
					t.Errorf("a code issued: the index was rebuilt, want it kept")
				}
			}
			bcSetClient(t, h, hPublic, func(c *fsm.Client) { c.WebOrigins, c.WebOriginsSet = []string{newOrigin}, true })
			if granted(appOrigin) || !granted(newOrigin) {
				t.Errorf("after update: got app %v new %v, want only new", granted(appOrigin), granted(newOrigin))
			}
			bcApply(t, h, fsm.TypeDeleteClient, fsm.DeleteClient{ID: hPublic})
			if granted(newOrigin) {
				t.Errorf("after delete: new still granted")
			}
		})
	}
}

func TestClientOrigins(t *testing.T) {
	redirects := []string{"https://app.example/cb", "https://app.example:443/other", "http://127.0.0.1:9999/cb", "com.example.app:/cb", "https://b.example:8443/cb"}
	for _, tt := range []struct {
		name string
		c    fsm.Client
		want []string
	}{
		{"public, default: its redirects' origins", fsm.Client{Type: fsm.ClientPublic, RedirectURIs: redirects},
			[]string{"https://app.example", "http://127.0.0.1:9999", "https://b.example:8443"}},
		{"confidential, default: none", fsm.Client{Type: fsm.ClientConfidential, RedirectURIs: redirects}, []string{}},
		{"explicit empty list", fsm.Client{Type: fsm.ClientPublic, RedirectURIs: redirects, WebOriginsSet: true}, []string{}},
		{"explicit, as a browser writes them", fsm.Client{Type: fsm.ClientConfidential, WebOriginsSet: true,
			WebOrigins: []string{"https://SPA.example:443", "http://localhost:5173", "not an origin"}},
			[]string{"https://spa.example", "http://localhost:5173"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := clientOrigins(tt.c); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	x := newOriginIndex([]fsm.Client{
		{ID: AdminClientID, Type: fsm.ClientPublic, RedirectURIs: redirects},
		{ID: "a", Type: fsm.ClientPublic, WebOriginsSet: true, WebOrigins: []string{spaOrigin}},
	}, originMark{})
	if x.listed("https://app.example") || x.allows(AdminClientID, "https://app.example") {
		t.Errorf("a record named %s: got its origins indexed, want none", AdminClientID)
	}
	if !x.listed(spaOrigin) || !x.allows("a", spaOrigin) || x.allows("b", spaOrigin) {
		t.Errorf("index: got listed %v, a %v, b %v; want true, true, false", x.listed(spaOrigin), x.allows("a", spaOrigin), x.allows("b", spaOrigin))
	}
}
