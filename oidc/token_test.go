package oidc

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/password"
)

func TestTokenSuccessShape(t *testing.T) {
	h := newHarness(t)
	code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid", "email"}, "nonce-0123456789", bcVerifier)
	stored, err := h.applier.State().Code(authn.HashToken(code))
	if err != nil {
		t.Fatal(err)
	}
	rec := bcExchange(t, h, hConfidential, hSecret, code)
	if rec.Code != http.StatusOK {
		t.Fatalf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "Pragma": "no-cache"} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if got, want := bcKeys(body), "access_token,expires_in,id_token,scope,token_type"; got != want {
		t.Errorf("members: got %q, want %q", got, want)
	}
	var resp tokenResponse
	json.Unmarshal(rec.Body.Bytes(), &resp)
	if resp.TokenType != "bearer" || resp.ExpiresIn != 600 || resp.Scope != "openid email" {
		t.Errorf("got token_type %q expires_in %d scope %q, want bearer 600 %q", resp.TokenType, resp.ExpiresIn, resp.Scope, "openid email")
	}
	now := h.clock.Now().Unix()
	iss := h.p.cfg.Issuer

	for name, tok := range map[string]string{"access": resp.AccessToken, "id": resp.IDToken} {
		hdr := bcHeader(t, tok)
		if hdr["alg"] != "RS256" || hdr["typ"] != "JWT" || hdr["kid"] == "" {
			t.Errorf("%s header: got %v, want alg RS256, typ JWT and a kid", name, hdr)
		}
	}

	at := bcClaims(t, resp.AccessToken)
	if got, want := bcKeys(at), "acr,amr,aud,auth_time,exp,iat,iss,jti,organization_id,scp,sid,sub"; got != want {
		t.Errorf("access claims: got %q, want %q", got, want)
	}
	id := bcClaims(t, resp.IDToken)
	if got, want := bcKeys(id), "acr,amr,at_hash,aud,auth_time,exp,iat,iss,jti,nonce,organization_id,rat,sid,sub"; got != want {
		t.Errorf("id claims: got %q, want %q", got, want)
	}
	str := func(m map[string]json.RawMessage, k string) string { return string(m[k]) }
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	num := func(n int64) string { b, _ := json.Marshal(n); return string(b) }
	for _, c := range []struct{ claims, name, got, want string }{
		{"access", "aud", str(at, "aud"), "[]"},
		{"access", "iss", str(at, "iss"), q(iss)},
		{"access", "sub", str(at, "sub"), q(hUser)},
		{"access", "iat", str(at, "iat"), num(now)},
		{"access", "exp", str(at, "exp"), num(now + 600)},
		{"access", "auth_time", str(at, "auth_time"), num(now)},
		{"access", "acr", str(at, "acr"), q(ACRPwd)},
		{"access", "amr", str(at, "amr"), `["pwd"]`},
		{"access", "sid", str(at, "sid"), q(stored.SID)},
		{"access", "organization_id", str(at, "organization_id"), q(hOrgA)},
		{"access", "scp", str(at, "scp"), `["openid","email"]`},
		{"id", "aud", str(id, "aud"), `["conf-app"]`},
		{"id", "iss", str(id, "iss"), q(iss)},
		{"id", "sub", str(id, "sub"), q(hUser)},
		{"id", "iat", str(id, "iat"), num(now)},
		{"id", "exp", str(id, "exp"), num(now + 600)},
		{"id", "auth_time", str(id, "auth_time"), num(now)},
		{"id", "acr", str(id, "acr"), q(ACRPwd)},
		{"id", "amr", str(id, "amr"), `["pwd"]`},
		{"id", "sid", str(id, "sid"), q(stored.SID)},
		{"id", "organization_id", str(id, "organization_id"), q(hOrgA)},
		{"id", "at_hash", str(id, "at_hash"), q(atHash([]byte(resp.AccessToken)))},
		{"id", "rat", str(id, "rat"), num(stored.RequestedAt.Unix())},
		{"id", "nonce", str(id, "nonce"), q("nonce-0123456789")},
	} {
		if c.got != c.want {
			t.Errorf("%s %s: got %q, want %q", c.claims, c.name, c.got, c.want)
		}
	}
	if at["jti"] == nil || id["jti"] == nil || string(at["jti"]) == string(id["jti"]) {
		t.Errorf("jti: access %s, id %s: want two distinct ids", at["jti"], id["jti"])
	}
	// The redemption recorded the access token's jti and expiry.
	after, _ := h.applier.State().Code(authn.HashToken(code))
	if q(after.AccessJTI) != string(at["jti"]) || after.AccessExpires.Unix() != now+600 {
		t.Errorf("code record: got jti %q exp %v, want %s and %d", after.AccessJTI, after.AccessExpires, at["jti"], now+600)
	}
}

func TestTokenVariants(t *testing.T) {
	h := newHarness(t)
	t.Run("public client, no nonce", func(t *testing.T) {
		code := h.signedInCode(hPublic, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
		rec := bcExchange(t, h, hPublic, "", code)
		if rec.Code != http.StatusOK {
			t.Fatalf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
		}
		var resp tokenResponse
		json.Unmarshal(rec.Body.Bytes(), &resp)
		if _, ok := bcClaims(t, resp.IDToken)["nonce"]; ok {
			t.Errorf("nonce present, want absent")
		}
	})
	t.Run("no openid scope: no id_token", func(t *testing.T) {
		code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"email"}, "", bcVerifier)
		rec := bcExchange(t, h, hConfidential, hSecret, code)
		var body map[string]any
		json.Unmarshal(rec.Body.Bytes(), &body)
		if _, ok := body["id_token"]; ok || rec.Code != http.StatusOK || body["scope"] != "email" {
			t.Errorf("got %d %s, want 200 without id_token, scope email", rec.Code, rec.Body)
		}
	})
	t.Run("scope parameter narrows nothing", func(t *testing.T) {
		code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid", "email"}, "", bcVerifier)
		rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, user: hConfidential, pass: hSecret,
			form: bcWith(bcTokenForm(code), "scope", "openid")})
		var body map[string]any
		json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusOK || body["scope"] != "openid email" {
			t.Errorf("got %d %s, want 200 with the granted scope %q", rec.Code, rec.Body, "openid email")
		}
	})
	t.Run("client_secret_post", func(t *testing.T) {
		code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
		rec := bcDo(t, h, bcReq{method: "POST", path: PathToken,
			form: bcWith(bcTokenForm(code), "client_id", hConfidential, "client_secret", hSecret)})
		if rec.Code != http.StatusOK {
			t.Errorf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
		}
	})
	t.Run("basic with the same client_id in the form", func(t *testing.T) {
		code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
		rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, user: hConfidential, pass: hSecret,
			form: bcWith(bcTokenForm(code), "client_id", hConfidential)})
		if rec.Code != http.StatusOK {
			t.Errorf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
		}
	})
	t.Run("access token lifetime of the registration", func(t *testing.T) {
		bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.AccessTokenTTL = 1800 })
		defer bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.AccessTokenTTL = 0 })
		for _, want := range []int64{1800, 600} {
			resp := bcTokens(t, h, hSiblingApp, hSiblingSec, "openid")
			at, id := bcClaims(t, resp.AccessToken), bcClaims(t, resp.IDToken)
			var iat, aexp, iexp int64
			json.Unmarshal(at["iat"], &iat)
			json.Unmarshal(at["exp"], &aexp)
			json.Unmarshal(id["exp"], &iexp)
			if resp.ExpiresIn != want || aexp-iat != want || iexp != aexp {
				t.Errorf("got expires_in %d, exp-iat %d, id exp-access exp %d, want %d, %d, 0", resp.ExpiresIn, aexp-iat, iexp-aexp, want, want)
			}
			bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.AccessTokenTTL = 0 }) // unset: the default
		}
	})
	t.Run("secret with reserved characters, form-urlencoded in Basic", func(t *testing.T) {
		const id, secret = "weird:app", "p@ss:w+rd/=% é&"
		bcApply(t, h, fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{ID: id, Type: fsm.ClientConfidential,
			SecretHash: password.HashSecret(secret), Scopes: []string{"openid"}, OrganizationID: hOrgA, RedirectURIs: []string{hRedirect}}})
		for _, c := range []struct {
			name       string
			user, pass string
			form       []string
			want       int
		}{
			{"basic, escaped", url.QueryEscape(id), url.QueryEscape(secret), nil, http.StatusOK},
			{"post, raw", "", "", []string{"client_id", id, "client_secret", secret}, http.StatusOK},
			{"basic, unescaped", "weird%3Aapp", secret, nil, http.StatusUnauthorized},
		} {
			code := h.signedInCode(id, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
			rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, user: c.user, pass: c.pass, form: bcWith(bcTokenForm(code), c.form...)})
			if rec.Code != c.want {
				t.Errorf("%s: got %d, want %d (%s)", c.name, rec.Code, c.want, rec.Body)
			}
		}
	})
}

// TestTokenErrors runs every request error of the token endpoint that leaves
// the code untouched against one code, then redeems it.
func TestTokenErrors(t *testing.T) {
	h := newHarness(t)
	code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid", "email"}, "", bcVerifier)
	good := bcTokenForm(code)
	raw := func(s string) *string { return &s }
	big := strings.Repeat("x", maxFormBody+1)
	wrongVerifier := strings.Repeat("v", 43)
	basic := [2]string{hConfidential, hSecret}
	cases := []struct {
		name        string
		req         bcReq
		basic       [2]string
		status      int
		code        string
		description string
	}{
		{name: "json body", req: bcReq{body: raw(`{"grant_type":"authorization_code"}`), contentType: "application/json"}, basic: basic, status: 400, code: "invalid_request"},
		{name: "no content type", req: bcReq{body: raw(good.Encode()), contentType: "text/plain"}, basic: basic, status: 400, code: "invalid_request"},
		{name: "bad escape", req: bcReq{body: raw(good.Encode() + "&x=%zz")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "semicolon", req: bcReq{body: raw(good.Encode() + ";x=1")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "body too large", req: bcReq{body: raw(good.Encode() + "&pad=" + big)}, basic: basic, status: 400, code: "invalid_request"},
		{name: "repeated code", req: bcReq{body: raw(good.Encode() + "&code=" + code)}, basic: basic, status: 400, code: "invalid_request"},
		{name: "repeated unknown parameter", req: bcReq{body: raw(good.Encode() + "&foo=1&foo=2")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "no grant_type", req: bcReq{form: bcWith(good, "grant_type", "")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "empty grant_type", req: bcReq{body: raw("grant_type=&code=" + code)}, basic: basic, status: 400, code: "invalid_request"},
		{name: "refresh_token grant", req: bcReq{form: bcWith(good, "grant_type", "refresh_token")}, basic: basic, status: 400, code: "unsupported_grant_type"},
		{name: "password grant", req: bcReq{form: bcWith(good, "grant_type", "password")}, basic: basic, status: 400, code: "unsupported_grant_type"},
		{name: "no code", req: bcReq{form: bcWith(good, "code", "")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "no redirect_uri", req: bcReq{form: bcWith(good, "redirect_uri", "")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "no code_verifier", req: bcReq{form: bcWith(good, "code_verifier", "")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "verifier of 42", req: bcReq{form: bcWith(good, "code_verifier", strings.Repeat("a", 42))}, basic: basic, status: 400, code: "invalid_request"},
		{name: "verifier of 129", req: bcReq{form: bcWith(good, "code_verifier", strings.Repeat("a", 129))}, basic: basic, status: 400, code: "invalid_request"},
		{name: "verifier with +", req: bcReq{form: bcWith(good, "code_verifier", strings.Repeat("a", 42)+"+")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "scope beyond the grant", req: bcReq{form: bcWith(good, "scope", "openid profile")}, basic: basic, status: 400, code: "invalid_request"},
		{name: "unknown code", req: bcReq{form: bcWith(good, "code", authn.NewID())}, basic: basic, status: 400, code: "invalid_grant"},
		{name: "other registered redirect_uri", req: bcReq{form: bcWith(good, "redirect_uri", "http://127.0.0.1:9999/cb")}, basic: basic, status: 400, code: "invalid_grant"},
		{name: "redirect_uri with a slash", req: bcReq{form: bcWith(good, "redirect_uri", hRedirect+"/")}, basic: basic, status: 400, code: "invalid_grant"},
		{name: "PKCE mismatch", req: bcReq{form: bcWith(good, "code_verifier", wrongVerifier)}, basic: basic, status: 400, code: "invalid_grant"},
		{name: "challenge sent as verifier", req: bcReq{form: bcWith(good, "code_verifier", authn.S256(bcVerifier))}, basic: basic, status: 400, code: "invalid_grant"},
		{name: "another client's code", req: bcReq{form: good}, basic: [2]string{hSiblingApp, hSiblingSec}, status: 400, code: "invalid_grant"},
		{name: "public client, another client's code", req: bcReq{form: bcWith(good, "client_id", hPublic)}, status: 400, code: "invalid_grant"},
		{name: "basic and client_secret", req: bcReq{form: bcWith(good, "client_secret", hSecret)}, basic: basic, status: 400, code: "invalid_request"},
		{name: "basic and another client_id", req: bcReq{form: bcWith(good, "client_id", hSiblingApp)}, basic: basic, status: 400, code: "invalid_request"},
		{name: "no client", req: bcReq{form: good}, status: 401, code: "invalid_client"},
		{name: "unknown client, basic", req: bcReq{form: good}, basic: [2]string{"nobody", "secret"}, status: 401, code: "invalid_client"},
		{name: "unknown client, post", req: bcReq{form: bcWith(good, "client_id", "nobody", "client_secret", "secret")}, status: 401, code: "invalid_client"},
		{name: "unknown public client", req: bcReq{form: bcWith(good, "client_id", "nobody")}, status: 401, code: "invalid_client"},
		{name: "wrong secret, basic", req: bcReq{form: good}, basic: [2]string{hConfidential, "wrong"}, status: 401, code: "invalid_client"},
		{name: "another client's secret", req: bcReq{form: good}, basic: [2]string{hConfidential, hSiblingSec}, status: 401, code: "invalid_client"},
		{name: "wrong secret, post", req: bcReq{form: bcWith(good, "client_id", hConfidential, "client_secret", "wrong")}, status: 401, code: "invalid_client"},
		{name: "confidential without secret", req: bcReq{form: bcWith(good, "client_id", hConfidential)}, status: 401, code: "invalid_client"},
		{name: "empty basic secret", req: bcReq{form: good}, basic: [2]string{hConfidential, ""}, status: 401, code: "invalid_client"},
		{name: "public client with a secret", req: bcReq{form: bcWith(good, "client_id", hPublic, "client_secret", "x")}, status: 401, code: "invalid_client"},
		{name: "public client over basic", req: bcReq{form: good}, basic: [2]string{hPublic, ""}, status: 401, code: "invalid_client"},
		{name: "bearer authorization", req: bcReq{form: good, auth: "Bearer abc"}, status: 401, code: "invalid_client"},
		{name: "basic not base64", req: bcReq{form: good, auth: "Basic %%%"}, status: 401, code: "invalid_client"},
		{name: "basic without colon", req: bcReq{form: good, auth: "Basic Y29uZi1hcHA="}, status: 401, code: "invalid_client"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.method, c.req.path = "POST", PathToken
			c.req.user, c.req.pass = c.basic[0], c.basic[1]
			rec := bcDo(t, h, c.req)
			bcOAuthError(t, rec, c.status, c.code)
			challenge := rec.Header().Get("WWW-Authenticate")
			wantChallenge := ""
			if c.status == 401 && (c.basic[0] != "" || c.req.auth != "") { // any Authorization attempt gets the Basic challenge
				wantChallenge = `Basic realm="oidcd"`
			}
			if challenge != wantChallenge {
				t.Errorf("WWW-Authenticate: got %q, want %q", challenge, wantChallenge)
			}
			if strings.Contains(rec.Body.String(), code) {
				t.Errorf("the answer echoes the code")
			}
		})
	}
	t.Run("the code still works", func(t *testing.T) {
		if rec := bcExchange(t, h, hConfidential, hSecret, code); rec.Code != http.StatusOK {
			t.Errorf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
		}
	})
}

func TestTokenReplayRevokesFirstToken(t *testing.T) {
	for _, wait := range []time.Duration{0, 61 * time.Second} {
		t.Run("after "+wait.String(), func(t *testing.T) {
			h := newHarness(t)
			code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid", "email"}, "", bcVerifier)
			first := bcExchange(t, h, hConfidential, hSecret, code)
			if first.Code != http.StatusOK {
				t.Fatalf("first exchange: got %d, want 200", first.Code)
			}
			var tok tokenResponse
			json.Unmarshal(first.Body.Bytes(), &tok)
			if got := bcUserinfoStatus(t, h, tok.AccessToken); got != http.StatusOK {
				t.Fatalf("userinfo before replay: got %d, want 200", got)
			}
			h.clock.Add(wait) // a used code past its expiry is still a replay
			bcOAuthError(t, bcExchange(t, h, hConfidential, hSecret, code), 400, "invalid_grant")
			if got := bcUserinfoStatus(t, h, tok.AccessToken); got != http.StatusUnauthorized {
				t.Errorf("userinfo after replay: got %d, want 401", got)
			}
			if got := bcIntrospect(t, h, hConfidential, hSecret, tok.AccessToken); len(got) != 1 || got["active"] != false {
				t.Errorf("introspect after replay: got %v, want {active:false}", got)
			}
		})
	}
}

func TestTokenPKCEMismatchKeepsCode(t *testing.T) {
	h := newHarness(t)
	code := h.signedInCode(hPublic, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
	bad := bcWith(bcTokenForm(code), "client_id", hPublic, "code_verifier", strings.Repeat("Z", 64))
	bcOAuthError(t, bcDo(t, h, bcReq{method: "POST", path: PathToken, form: bad}), 400, "invalid_grant")
	if rec := bcExchange(t, h, hPublic, "", code); rec.Code != http.StatusOK {
		t.Errorf("right verifier after a wrong one: got %d, want 200 (%s)", rec.Code, rec.Body)
	}
}

func TestTokenExpiredCode(t *testing.T) {
	h := newHarness(t)
	late := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
	onTime := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
	h.clock.Add(59 * time.Second)
	if rec := bcExchange(t, h, hConfidential, hSecret, onTime); rec.Code != http.StatusOK {
		t.Errorf("at 59 s: got %d, want 200 (%s)", rec.Code, rec.Body)
	}
	h.clock.Add(time.Second)
	rec := bcExchange(t, h, hConfidential, hSecret, late)
	bcOAuthError(t, rec, 400, "invalid_request")
	var body map[string]string
	json.Unmarshal(rec.Body.Bytes(), &body)
	if got, want := body["error_description"], "the code has expired"; got != want {
		t.Errorf("error_description: got %q, want %q", got, want)
	}
}

// TestTokenAccessChanged: what changes between the code and its exchange
// makes the exchange fail.
func TestTokenAccessChanged(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, h *harness, code fsm.Code)
		status int
		error  string
	}{
		{"membership suspended", func(t *testing.T, h *harness, _ fsm.Code) {
			bcApply(t, h, fsm.TypeUpdateMembership, fsm.UpdateMembership{ID: hMemA, Status: fsm.MembershipSuspended, At: h.clock.Now()})
		}, 400, "invalid_grant"},
		{"membership removed", func(t *testing.T, h *harness, _ fsm.Code) {
			bcApply(t, h, fsm.TypeDeleteMembership, fsm.DeleteMembership{ID: hMemA})
		}, 400, "invalid_grant"},
		{"organization deleted", func(t *testing.T, h *harness, _ fsm.Code) {
			bcApply(t, h, fsm.TypeDeleteOrg, fsm.DeleteOrg{ID: hOrgA, At: h.clock.Now()})
		}, 400, "invalid_grant"},
		{"signed out", func(t *testing.T, h *harness, c fsm.Code) {
			bcApply(t, h, fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: c.SSOSessionID, At: h.clock.Now(), Reason: fsm.EndLogout})
		}, 400, "invalid_grant"},
		{"client suspended", func(t *testing.T, h *harness, _ fsm.Code) {
			bcSetClient(t, h, hConfidential, func(c *fsm.Client) { c.Suspended = true })
		}, 401, "invalid_client"},
		{"store unavailable", func(t *testing.T, h *harness, _ fsm.Code) {
			h.applier.Fail = errors.New("no leader")
		}, 503, "temporarily_unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
			stored, _ := h.applier.State().Code(authn.HashToken(code))
			c.change(t, h, stored)
			bcOAuthError(t, bcExchange(t, h, hConfidential, hSecret, code), c.status, c.error)
			if h.applier.Fail != nil { // a failed write consumed nothing
				h.applier.Fail = nil
				if rec := bcExchange(t, h, hConfidential, hSecret, code); rec.Code != http.StatusOK {
					t.Errorf("after the store is back: got %d, want 200", rec.Code)
				}
			}
		})
	}
}

func TestValidVerifier(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{
		{strings.Repeat("a", 43), true},
		{strings.Repeat("a", 128), true},
		{"AZaz09-._~" + strings.Repeat("x", 33), true},
		{strings.Repeat("a", 42), false},
		{strings.Repeat("a", 129), false},
		{strings.Repeat("a", 42) + "=", false},
		{strings.Repeat("a", 42) + " ", false},
		{strings.Repeat("a", 42) + "é", false},
	} {
		if got := validVerifier(c.v); got != c.want {
			t.Errorf("validVerifier(%q): got %v, want %v", c.v, got, c.want)
		}
	}
}
