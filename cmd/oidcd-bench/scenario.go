package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
)

// scenario is one kind of operation. An operation is timed from its first
// request to its last check; what a worker needs beforehand (an SSO
// session, an access token) is obtained outside the timing.
type scenario struct {
	name         string
	needsSession bool // a browser with a live SSO session
	needsToken   bool // an access token of the worker's person
	federated    bool // an upstream provider, started for the run (startFederation)
	op           func(ctx context.Context, w *worker) error
}

const mixedName = "mixed"

// scenarioNames lists the --scenario values in the order of the help.
var scenarioNames = []string{"password-signin", federatedName, "silent-signin", "userinfo", "introspect", "discovery", "jwks", "preflight", mixedName}

var scenarios = map[string]*scenario{
	"password-signin": {name: "password-signin", op: opPasswordSignIn},
	"silent-signin":   {name: "silent-signin", needsSession: true, op: opSilentSignIn},
	"userinfo":        {name: "userinfo", needsSession: true, needsToken: true, op: opUserinfo},
	"introspect":      {name: "introspect", needsSession: true, needsToken: true, op: opIntrospect},
	"discovery":       {name: "discovery", op: opDiscovery},
	"jwks":            {name: "jwks", op: opJWKS},
	"preflight":       {name: "preflight", op: opPreflight},
	// mixed draws one of the above per operation (mixedWeights); its
	// workers hold a session and a token from the start.
	mixedName: {name: mixedName, needsSession: true, needsToken: true},
	// federated-signin brings its upstream (federation.go).
	federatedName: {name: federatedName, federated: true, op: opFederatedSignIn},
}

// trivialName is the scenario of the matrix's ceiling: GET / of a
// trivial JSON handler. It is not offered by --scenario: it needs no
// provider.
const trivialName = "trivial"

var trivialScenario = &scenario{name: trivialName, op: opTrivial}

// lookupScenario returns the scenario called name, nil when none is.
func lookupScenario(name string) *scenario {
	if name == trivialName {
		return trivialScenario
	}
	return scenarios[name]
}

// mixedWeights is the mixed profile, in percent.
var mixedWeights = []struct {
	name   string
	weight int
}{
	{"password-signin", 10},
	{"silent-signin", 30},
	{"userinfo", 40},
	{"introspect", 10},
	{"discovery", 5},
	{"jwks", 5},
}

// worker is one browser and relying party, used by one goroutine.
type worker struct {
	b           *bench
	p           person       // the person of its SSO session and token
	hc          *http.Client // its browser, holding the SSO session
	token       string
	tokenExpiry time.Time
	needSession bool
	needToken   bool
	rng         *rand.Rand
}

// choose returns the scenario of the next operation.
func (w *worker) choose() *scenario {
	if w.b.sc.name != mixedName {
		return w.b.sc
	}
	n := w.rng.IntN(100)
	for _, m := range mixedWeights {
		if n < m.weight {
			return scenarios[m.name]
		}
		n -= m.weight
	}
	return scenarios[mixedWeights[0].name]
}

// prepare gives the worker what sc needs, outside any timing: a fresh SSO
// session by password when it has none (or the provider said
// login_required), a token by a silent sign-in when it has none, it was
// refused, or it expires within renewBefore.
func (w *worker) prepare(ctx context.Context, sc *scenario) error {
	ctx, cancel := context.WithTimeout(ctx, w.b.cfg.timeout)
	defer cancel()
	if (sc.needsSession || sc.needsToken) && (w.needSession || w.hc == nil) {
		w.hc = w.b.newBrowser()
		at, ex := w.b.pick()
		tok, err := w.b.signIn(ctx, w.hc, at, ex, w.p, false)
		if err != nil {
			return err
		}
		w.setToken(tok)
		w.needSession = false
	}
	if sc.needsToken && (w.needToken || time.Until(w.tokenExpiry) < w.b.renewBefore()) {
		at, ex := w.b.pick()
		tok, err := w.b.signIn(ctx, w.hc, at, ex, w.p, true)
		if err != nil {
			w.noteSessionLost(err)
			return err
		}
		w.setToken(tok)
	}
	return nil
}

// renewBefore is how long before its expiry a worker's token is
// renewed: a minute, or a quarter of a shorter lifetime (a soak's 60 s
// tokens are used for 45 s, not renewed before every operation).
func (b *bench) renewBefore() time.Duration {
	ttl := time.Duration(b.cfg.tokenTTL) * time.Second
	if ttl <= 0 {
		return time.Minute
	}
	return min(time.Minute, ttl/4)
}

func (w *worker) setToken(tok *oauth2.Token) {
	w.token, w.tokenExpiry, w.needToken = tok.AccessToken, tok.Expiry, false
	if tok.Expiry.IsZero() {
		w.tokenExpiry = time.Now().Add(10 * time.Minute)
	}
}

// noteSessionLost marks the session for renewal when the provider no
// longer knows it.
func (w *worker) noteSessionLost(err error) {
	if classify(err) == "authorize login_required" {
		w.needSession = true
	}
}

// loop runs operations until ctx ends or the request budget is spent.
func (w *worker) loop(ctx context.Context) {
	for ctx.Err() == nil {
		sc := w.choose()
		if err := w.prepare(ctx, sc); err != nil {
			if ctx.Err() != nil {
				return
			}
			w.b.fail(sc.name, "setup "+classify(err), err)
			select { // do not spin on a provider that refuses everything
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if !w.b.ticket() {
			return
		}
		opCtx, cancel := context.WithTimeout(ctx, w.b.cfg.timeout)
		start := time.Now()
		err := sc.op(opCtx, w)
		d := time.Since(start)
		cancel()
		switch {
		case err == nil:
			w.b.ok(sc.name, d)
		case ctx.Err() != nil:
			return // cut short by the end of the run: neither a success nor an error
		default:
			w.b.fail(sc.name, classify(err), err)
		}
	}
}

func opPasswordSignIn(ctx context.Context, w *worker) error {
	at, ex := w.b.pick()
	_, err := w.b.signIn(ctx, w.b.newBrowser(), at, ex, w.b.nextPerson(), false)
	return err
}

func opSilentSignIn(ctx context.Context, w *worker) error {
	at, ex := w.b.pick()
	tok, err := w.b.signIn(ctx, w.hc, at, ex, w.p, true)
	if err != nil {
		w.noteSessionLost(err)
		return err
	}
	w.setToken(tok)
	return nil
}

func opUserinfo(ctx context.Context, w *worker) error {
	at, _ := w.b.pick()
	req, err := http.NewRequestWithContext(ctx, "GET", at+w.b.paths.userinfo, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	var v struct {
		Sub string `json:"sub"`
	}
	if err := w.b.callJSON(req, &v); err != nil {
		if strings.HasPrefix(classify(err), "401") {
			w.needToken = true
		}
		return err
	}
	if v.Sub != w.p.id {
		return failf("wrong_sub", "userinfo sub %q, want %q", v.Sub, w.p.id)
	}
	return nil
}

func opIntrospect(ctx context.Context, w *worker) error {
	at, _ := w.b.pick()
	form := url.Values{"token": {w.token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, "POST", at+w.b.paths.introspect, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(w.b.w.confID), url.QueryEscape(w.b.w.confSecret))
	var v struct {
		Active bool   `json:"active"`
		Sub    string `json:"sub"`
	}
	if err := w.b.callJSON(req, &v); err != nil {
		return err
	}
	if !v.Active {
		w.needToken = true
		return failf("inactive", "introspection answered active:false for a live token")
	}
	if v.Sub != w.p.id {
		return failf("wrong_sub", "introspection sub %q, want %q", v.Sub, w.p.id)
	}
	return nil
}

func opDiscovery(ctx context.Context, w *worker) error {
	at, _ := w.b.pick()
	req, err := http.NewRequestWithContext(ctx, "GET", at+"/.well-known/openid-configuration", nil)
	if err != nil {
		return err
	}
	return w.b.callStatic(req, &w.b.discoveryBody, func(body []byte) error {
		var v struct {
			Issuer string `json:"issuer"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return failf("bad_json", "%s: %v", req.URL.Path, err)
		}
		if v.Issuer != w.b.cfg.issuer {
			return failf("wrong_issuer", "discovery issuer %q, want %q", v.Issuer, w.b.cfg.issuer)
		}
		return nil
	})
}

// opPreflight is a single-page app's CORS preflight of the token
// endpoint, from the origin of the public client's redirect URI (its
// default web origin): 204 and the grant, no write.
func opPreflight(ctx context.Context, w *worker) error {
	at, _ := w.b.pick()
	req, err := http.NewRequestWithContext(ctx, http.MethodOptions, at+w.b.paths.token, nil)
	if err != nil {
		return err
	}
	origin := strings.TrimSuffix(redirectURI, "/cb")
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	resp, err := w.b.rp.Do(req)
	if err != nil {
		return err
	}
	body, err := readAll(resp)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusNoContent {
		return statusError(resp.StatusCode, body, req.URL.Path)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != origin {
		return failf("no_grant", "preflight from %s: Access-Control-Allow-Origin %q", origin, got)
	}
	return nil
}

func opJWKS(ctx context.Context, w *worker) error {
	at, _ := w.b.pick()
	req, err := http.NewRequestWithContext(ctx, "GET", at+w.b.paths.jwks, nil)
	if err != nil {
		return err
	}
	return w.b.callStatic(req, &w.b.jwksBody, func(body []byte) error {
		var v struct {
			Keys []json.RawMessage `json:"keys"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return failf("bad_json", "%s: %v", req.URL.Path, err)
		}
		if len(v.Keys) == 0 {
			return failf("empty_jwks", "the key set has no key")
		}
		return nil
	})
}

// opTrivial is GET / of the trivial handler, checked like discovery.
func opTrivial(ctx context.Context, w *worker) error {
	at, _ := w.b.pick()
	req, err := http.NewRequestWithContext(ctx, "GET", at+"/", nil)
	if err != nil {
		return err
	}
	return w.b.callStatic(req, &w.b.trivialBody, func(body []byte) error {
		var v struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return failf("bad_json", "%s: %v", req.URL.Path, err)
		}
		if v.Status != "ok" {
			return failf("wrong_body", "trivial handler said %q", v.Status)
		}
		return nil
	})
}

// callStatic sends req for a document that is the same on every call
// (discovery, the key set, the trivial handler) and checks the 200
// answer: a body equal byte for byte to the last one that passed check
// passes; any other is checked in full and, when it passes, becomes the
// reference. So every answer is verified, and a run measures the
// provider rather than the tool's JSON decoder.
func (b *bench) callStatic(req *http.Request, last *atomic.Pointer[[]byte], check func(body []byte) error) error {
	req.Header.Set("User-Agent", "oidcd-bench")
	req.Header.Set("Accept", "application/json")
	resp, err := b.rp.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := readAll(resp)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(resp.StatusCode, body, req.URL.Path)
	}
	if ref := last.Load(); ref != nil && bytes.Equal(body, *ref) {
		return nil
	}
	if err := check(body); err != nil {
		return err
	}
	last.Store(&body)
	return nil
}

// callJSON sends req as the relying party and decodes a 200 JSON answer
// into out; any other status is a statusError.
func (b *bench) callJSON(req *http.Request, out any) error {
	req.Header.Set("User-Agent", "oidcd-bench")
	req.Header.Set("Accept", "application/json")
	resp, err := b.rp.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body []byte
	body, err = readAll(resp)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(resp.StatusCode, body, req.URL.Path)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return failf("bad_json", "%s: %v", req.URL.Path, err)
	}
	return nil
}
