package oidc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/password"
)

const tAdminLoopback = "http://127.0.0.1:54321/callback"

// TestAdminLoopbackRedirects: the built-in client's loopback rule, the
// one of every native client (redirect.Match over its registered
// http://127.0.0.1/callback and http://[::1]/callback): 127.0.0.1 or
// [::1] written plainly, any port, the path exactly /callback, nothing
// else in the URI.
func TestAdminLoopbackRedirects(t *testing.T) {
	admin := (&Provider{cfg: Config{Issuer: "https://id.example"}}).adminClient()
	for uri, want := range map[string]bool{
		"http://127.0.0.1:54321/callback": true,
		"http://127.0.0.1:1/callback":     true,
		"http://127.0.0.1:65535/callback": true,
		"http://127.0.0.1/callback":       true,
		"http://[::1]:8080/callback":      true,
		"http://[::1]/callback":           true,

		"http://127.0.0.1:0/callback":            false,
		"http://127.0.0.1:65536/callback":        false,
		"http://127.0.0.1:08080/callback":        false,
		"http://127.0.0.1:/callback":             false,
		"http://127.0.0.1:8080/callback/":        false,
		"http://127.0.0.1:8080/callbacks":        false,
		"http://127.0.0.1:8080/cb":               false,
		"http://127.0.0.1:8080/":                 false,
		"http://127.0.0.1:8080/callback?x=1":     false,
		"http://127.0.0.1:8080/callback?":        false,
		"http://127.0.0.1:8080/callback#x":       false,
		"http://127.0.0.1:8080/%63allback":       false,
		"http://user@127.0.0.1:8080/callback":    false,
		"https://127.0.0.1:8080/callback":        false,
		"http://localhost:8080/callback":         false,
		"http://127.0.0.2:8080/callback":         false,
		"http://127.1:8080/callback":             false,
		"http://[::2]:8080/callback":             false,
		"http://[0:0:0:0:0:0:0:1]:80/callback":   false,
		"http://evil.example:8080/callback":      false,
		"http://127.0.0.1.evil.example/callback": false,
		"HTTP://127.0.0.1:8080/callback":         false,
		"Http://[::1]:8080/callback":             false,
		"http://127.0.0.1:8080/callback%20":      false,
		"http://[::1%25lo]:8080/callback":        false,
		"":                                       false,
	} {
		if got := checkRedirectURI(admin, uri) == nil; got != want {
			t.Errorf("checkRedirectURI(oidcd-admin, %q): got %v, want %v", uri, got, want)
		}
	}
}

// adminQuery is a valid request of the built-in client to redirect.
func adminQuery(redirect string, mods ...map[string]string) url.Values {
	q := authzQuery(AdminClientID, map[string]string{"redirect_uri": redirect})
	return authzQueryMods(q, mods...)
}

func authzQueryMods(q url.Values, mods ...map[string]string) url.Values {
	for _, m := range mods {
		for k, v := range m {
			if v == "" {
				q.Del(k)
			} else {
				q.Set(k, v)
			}
		}
	}
	return q
}

// adminRedirect checks that p redirects to the built-in client's
// redirect and returns its query.
func adminRedirect(t *testing.T, p page, redirect string) url.Values {
	t.Helper()
	if p.status != http.StatusFound {
		t.Fatalf("status: got %d, want 302; body:\n%s", p.status, p.body)
	}
	base, query, _ := strings.Cut(p.location(), "?")
	if base != redirect {
		t.Fatalf("Location: got %q, want %s?...", p.location(), redirect)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("state") != tState || q.Get("iss") != p.issuer {
		t.Errorf("state %q, iss %q: want %q, %q", q.Get("state"), q.Get("iss"), tState, p.issuer)
	}
	return q
}

// adminExchange redeems code as the built-in client (public: client_id
// in the form).
func adminExchange(t *testing.T, h *harness, code, redirect, verifier string) (int, tokenResponse, map[string]any) {
	t.Helper()
	rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, form: url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"code_verifier": {verifier}, "client_id": {AdminClientID},
	}})
	var tr tokenResponse
	var raw map[string]any
	json.Unmarshal(rec.Body.Bytes(), &tr)
	json.Unmarshal(rec.Body.Bytes(), &raw)
	return rec.Code, tr, raw
}

// adminToken signs userID in through the built-in client with a live
// session of acr and returns the token response.
func adminToken(t *testing.T, h *harness, userID, acr string) (tokenResponse, string) {
	t.Helper()
	b := h.browser()
	sid := h.liveSession(b, userID, acr, AMRPassword, AMROTP)
	q := adminRedirect(t, b.get(authzPath(adminQuery(tAdminLoopback))), tAdminLoopback)
	if q.Get("error") != "" {
		t.Fatalf("got %s %s, want a code", q.Get("error"), q.Get("error_description"))
	}
	status, tr, raw := adminExchange(t, h, q.Get("code"), tAdminLoopback, tVerifier)
	if status != http.StatusOK {
		t.Fatalf("token: got %d %v, want 200", status, raw)
	}
	return tr, sid
}

// TestAdminClientFlow: a person who belongs to no organization signs in
// through the built-in client to a loopback port, with no consent page;
// the token names no organization, says its client and acr to
// CheckAdminToken, is refused by the protocol's bearer endpoints, and a
// code works once.
func TestAdminClientFlow(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	b := h.browser()
	h.liveSession(b, hUserB, ACRMFA, AMRPassword, AMROTP)
	q := adminRedirect(t, b.get(authzPath(adminQuery(tAdminLoopback, map[string]string{"scope": "openid profile email"}))), tAdminLoopback)
	code := q.Get("code")
	if code == "" {
		t.Fatalf("no code: %v", q)
	}
	status, tr, raw := adminExchange(t, h, code, tAdminLoopback, tVerifier)
	if status != http.StatusOK {
		t.Fatalf("token: got %d %v", status, raw)
	}
	if tr.ExpiresIn != 3600 || tr.Scope != "openid profile email" || tr.IDToken == "" {
		t.Errorf("token response %+v", tr)
	}
	claims := bcClaims(t, tr.AccessToken)
	// The claims of the built-in client's tokens, as they were before its
	// codes went through the one code exchange.
	if got, want := bcKeys(claims), "acr,amr,aud,auth_time,client_id,exp,iat,iss,jti,scp,sid,sub"; got != want {
		t.Errorf("access token claims: got %s, want %s", got, want)
	}
	if got, want := bcKeys(bcClaims(t, tr.IDToken)), "acr,amr,at_hash,aud,auth_time,exp,iat,iss,jti,nonce,rat,sid,sub"; got != want {
		t.Errorf("id token claims: got %s, want %s", got, want)
	}
	if claims["sid"] == nil || string(claims["sid"]) != string(bcClaims(t, tr.IDToken)["sid"]) {
		t.Errorf("sid: access %s, id %s, want the SSO session in both", claims["sid"], bcClaims(t, tr.IDToken)["sid"])
	}
	if _, ok := claims["organization_id"]; ok {
		t.Errorf("access token names an organization: %s", claims["organization_id"])
	}
	if string(claims["client_id"]) != `"`+AdminClientID+`"` || string(claims["acr"]) != `"`+ACRMFA+`"` {
		t.Errorf("claims client_id %s, acr %s", claims["client_id"], claims["acr"])
	}
	id := bcClaims(t, tr.IDToken)
	if string(id["aud"]) != `["`+AdminClientID+`"]` || string(id["nonce"]) != `"`+tNonce+`"` {
		t.Errorf("id token aud %s nonce %s", id["aud"], id["nonce"])
	}
	got, err := h.p.CheckAdminToken(ctx, tr.AccessToken)
	if want := (AdminToken{Active: true, Sub: hUserB, ClientID: AdminClientID, ACR: ACRMFA}); err != nil || got != want {
		t.Fatalf("CheckAdminToken: got %+v %v, want %+v", got, err, want)
	}
	if s := bcUserinfoStatus(t, h, tr.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("userinfo with an admin token: got %d, want 401", s)
	}
	// The code was taken: a second exchange fails.
	if status, _, raw := adminExchange(t, h, code, tAdminLoopback, tVerifier); status != http.StatusBadRequest || raw["error"] != "invalid_grant" {
		t.Errorf("replay: got %d %v, want 400 invalid_grant", status, raw)
	}
	// Garbage is inactive, not an error.
	for _, tok := range []string{"", "x", tr.IDToken, tr.AccessToken + "x"} {
		if got, err := h.p.CheckAdminToken(ctx, tok); err != nil || got.Active {
			t.Errorf("CheckAdminToken(%.20q): got %+v %v, want inactive", tok, got, err)
		}
	}
}

// TestAdminClientPKCE: PKCE is required at /authorize, and the verifier
// must match at the token endpoint (a wrong one burns the code).
func TestAdminClientPKCE(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	h.liveSession(b, hUser, ACRMFA, AMRPassword, AMROTP)
	for _, mod := range []map[string]string{
		{"code_challenge": ""},
		{"code_challenge_method": ""},
		{"code_challenge_method": "plain"},
	} {
		wantErrorPage(t, b.get(authzPath(adminQuery(tAdminLoopback, mod))), http.StatusBadRequest)
	}
	q := adminRedirect(t, b.get(authzPath(adminQuery(tAdminLoopback))), tAdminLoopback)
	if status, _, raw := adminExchange(t, h, q.Get("code"), tAdminLoopback, tVerifier+"-wrong"); status != http.StatusBadRequest || raw["error"] != "invalid_grant" {
		t.Errorf("wrong verifier: got %d %v", status, raw)
	}
	if status, _, raw := adminExchange(t, h, q.Get("code"), tAdminLoopback, tVerifier); status != http.StatusBadRequest {
		t.Errorf("after a wrong verifier: got %d %v, want 400", status, raw)
	}
	q = adminRedirect(t, b.get(authzPath(adminQuery("http://127.0.0.1:2000/callback"))), "http://127.0.0.1:2000/callback")
	if status, _, raw := adminExchange(t, h, q.Get("code"), "http://127.0.0.1:2001/callback", tVerifier); status != http.StatusBadRequest || raw["error"] != "invalid_grant" {
		t.Errorf("other redirect_uri: got %d %v", status, raw)
	}
}

// TestAdminClientRedirects: any loopback port, the console's callback
// under the issuer and on the admin listener; nothing else, and a stored
// client that took the id changes nothing.
func TestAdminClientRedirects(t *testing.T) {
	const adminListener = "https://admin.example:9443/console/callback"
	h := newHarness(t, func(c *Config) { c.AdminRedirectURIs = func() []string { return []string{adminListener} } })
	// A stored client with the built-in id (an API that let it through)
	// is never consulted.
	h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
		ID: AdminClientID, Name: "Impostor", Type: fsm.ClientConfidential, SecretHash: password.HashSecret(hSecret),
		Scopes: []string{"openid"}, OrganizationID: hOrgA, RedirectURIs: []string{hRedirect}, SkipConsent: true,
	}})
	b := h.browser()
	h.liveSession(b, hUser, ACRMFA, AMRPassword, AMROTP)
	for _, uri := range []string{
		tAdminLoopback, "http://127.0.0.1:1/callback", "http://[::1]:40000/callback",
		h.p.cfg.Issuer + "/console/callback", adminListener,
	} {
		q := adminRedirect(t, b.get(authzPath(adminQuery(uri))), uri)
		if q.Get("code") == "" {
			t.Errorf("%s: no code (%v)", uri, q)
		}
	}
	for _, uri := range []string{
		hRedirect, "http://127.0.0.1:8080/cb", "http://localhost:8080/callback", "https://127.0.0.1:8080/callback",
		"http://127.0.0.1:8080/callback?x=1", "http://evil.example/callback", "http://evil.example/console/callback",
		h.p.cfg.Issuer + "/console/callback/", "https://admin.example:9444/console/callback",
		// The harness's issuer is at 127.0.0.1: its console callback
		// still matches at its own port only.
		"http://127.0.0.1:1/console/callback", "http://[::1]/console/callback",
	} {
		wantErrorPage(t, b.get(authzPath(adminQuery(uri))), http.StatusBadRequest)
	}
	// The impostor's secret opens nothing at the token endpoint.
	rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, user: AdminClientID, pass: hSecret, form: bcTokenForm("nope")})
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("token with the impostor's secret: got %d %s, want 401", rec.Code, rec.Body)
	}
	// Nor may the built-in client introspect.
	rec = bcDo(t, h, bcReq{method: "POST", path: PathIntrospect, form: url.Values{"client_id": {AdminClientID}, "token": {"x"}}})
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("introspect as the built-in client: got %d %s, want 401", rec.Code, rec.Body)
	}
}

// TestAdminClientACR: a sign-in through the built-in client reaches the
// admin acr: without a second factor it is denied; with AdminACR pwd a
// password session is enough and the check reports pwd.
func TestAdminClientACR(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	h.liveSession(b, hUser, ACRPwd, AMRPassword)
	q := adminRedirect(t, b.get(authzPath(adminQuery(tAdminLoopback))), tAdminLoopback)
	if q.Get("error") != errNoSecondFactor.Code || q.Get("error_description") != errNoSecondFactor.Description {
		t.Errorf("pwd session without a second factor: got %v, want %s", q, errNoSecondFactor)
	}

	h = newHarness(t, func(c *Config) { c.AdminACR = ACRPwd })
	tr, _ := adminToken(t, h, hUser, ACRPwd)
	got, err := h.p.CheckAdminToken(context.Background(), tr.AccessToken)
	if err != nil || !got.Active || got.ACR != ACRPwd {
		t.Errorf("CheckAdminToken: got %+v %v, want active pwd", got, err)
	}
}

// TestAdminTokenLiveness: revoked (by the built-in client at the
// revocation endpoint), session ended, person erased: inactive at once.
func TestAdminTokenLiveness(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	active := func(tok string) bool {
		t.Helper()
		got, err := h.p.CheckAdminToken(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		return got.Active
	}

	tr, _ := adminToken(t, h, hUser, ACRMFA)
	other, _ := adminToken(t, h, hUser, ACRMFA)
	rec := bcDo(t, h, bcReq{method: "POST", path: PathRevoke, form: url.Values{"client_id": {AdminClientID}, "token": {tr.AccessToken}}})
	if rec.Code != http.StatusOK {
		t.Fatalf("revoke: got %d %s", rec.Code, rec.Body)
	}
	if active(tr.AccessToken) || !active(other.AccessToken) {
		t.Errorf("after revoking one: got %v %v, want false true", active(tr.AccessToken), active(other.AccessToken))
	}
	// The built-in client revokes only its own tokens.
	app := bcTokens(t, h, hPublic, "")
	bcDo(t, h, bcReq{method: "POST", path: PathRevoke, form: url.Values{"client_id": {AdminClientID}, "token": {app.AccessToken}}})
	if bcUserinfoStatus(t, h, app.AccessToken) != http.StatusOK {
		t.Error("the built-in client revoked an application's token")
	}

	tr, sid := adminToken(t, h, hUser, ACRMFA)
	h.apply(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: sid, At: h.clock.Now(), Reason: "logout"})
	if active(tr.AccessToken) {
		t.Error("active after its session ended")
	}

	tr, _ = adminToken(t, h, hUserB, ACRMFA)
	h.apply(fsm.TypeDeleteUser, fsm.DeleteUser{ID: hUserB, At: h.clock.Now()})
	if active(tr.AccessToken) {
		t.Error("active after its person was erased")
	}
}

// TestCheckAdminTokenOtherClient: an application's token is reported
// with its client id (the admin API refuses it), and inactive once
// revoked.
func TestCheckAdminTokenOtherClient(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	tr := bcTokens(t, h, hConfidential, hSecret)
	got, err := h.p.CheckAdminToken(ctx, tr.AccessToken)
	if want := (AdminToken{Active: true, Sub: hUser, ClientID: hConfidential, ACR: ACRPwd}); err != nil || got != want {
		t.Fatalf("got %+v %v, want %+v", got, err, want)
	}
	rec := bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: hConfidential, pass: hSecret, form: url.Values{"token": {tr.AccessToken}}})
	if rec.Code != http.StatusOK {
		t.Fatalf("revoke: %d %s", rec.Code, rec.Body)
	}
	if got, err := h.p.CheckAdminToken(ctx, tr.AccessToken); err != nil || got.Active {
		t.Errorf("revoked: got %+v %v, want inactive", got, err)
	}
}

// TestAdminTokenEndsWithItsSession: the token's lifetime is cut to the
// session's idle deadline (the built-in client's sign-in does not extend
// it), so the CLI knows when it stops working.
func TestAdminTokenEndsWithItsSession(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	now := h.clock.Now()
	secret := authn.NewID()
	h.apply(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: authn.HashToken(secret), Session: fsm.SSOSession{
		ID: authn.NewID(), UserID: hUser, AuthTime: now, AMR: []string{AMRPassword, AMROTP}, ACR: ACRMFA,
		CreatedAt: now, LastSeen: now, IdleExpiresAt: now.Add(10 * time.Minute), ExpiresAt: now.Add(12 * time.Hour),
	}})
	b.setCookie(cookieSession, secret)
	q := adminRedirect(t, b.get(authzPath(adminQuery(tAdminLoopback))), tAdminLoopback)
	status, tr, raw := adminExchange(t, h, q.Get("code"), tAdminLoopback, tVerifier)
	if status != http.StatusOK || tr.ExpiresIn != 600 {
		t.Fatalf("token: %d %v, want expires_in 600", status, raw)
	}
	h.clock.Add(10*time.Minute + clockSkew)
	if got, err := h.p.CheckAdminToken(context.Background(), tr.AccessToken); err != nil || got.Active {
		t.Errorf("after the session's idle deadline: got %+v %v, want inactive", got, err)
	}
}
