package oidc

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

func TestIntrospectActive(t *testing.T) {
	h := newHarness(t)
	tok := bcTokens(t, h, hConfidential, hSecret, "openid", "email")
	pub := bcTokens(t, h, hPublic, "", "openid")
	at := bcClaims(t, tok.AccessToken)
	var exp int64
	json.Unmarshal(at["exp"], &exp)
	var sid string
	json.Unmarshal(at["sid"], &sid)
	want := map[string]any{"active": true, "client_id": hConfidential, "exp": float64(exp), "organization_id": hOrgA,
		"scope": "openid email", "sid": sid, "sub": hUser}

	cases := []struct {
		name  string
		req   bcReq
		token string
		want  map[string]any // nil: {"active":false}
	}{
		{"minting app, basic", bcReq{user: hConfidential, pass: hSecret}, tok.AccessToken, want},
		{"minting app, post", bcReq{form: url.Values{"client_id": {hConfidential}, "client_secret": {hSecret}}}, tok.AccessToken, want},
		{"same-owner sibling app", bcReq{user: hSiblingApp, pass: hSiblingSec}, tok.AccessToken, want},
		{"hint access_token", bcReq{user: hConfidential, pass: hSecret, form: url.Values{"token_type_hint": {"access_token"}}}, tok.AccessToken, want},
		{"hint refresh_token is ignored", bcReq{user: hConfidential, pass: hSecret, form: url.Values{"token_type_hint": {"refresh_token"}}}, tok.AccessToken, want},
		{"public app's token, same owner", bcReq{user: hConfidential, pass: hSecret}, pub.AccessToken, map[string]any{"client_id": hPublic}},
		{"another organization's app", bcReq{user: hOtherOrgApp, pass: hOtherSecret}, tok.AccessToken, nil},
		{"id token", bcReq{user: hConfidential, pass: hSecret}, tok.IDToken, nil},
		{"garbage", bcReq{user: hConfidential, pass: hSecret}, "garbage", nil},
		{"tampered", bcReq{user: hConfidential, pass: hSecret}, tok.AccessToken[:len(tok.AccessToken)-20] + strings.Repeat("A", 20), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.method, c.req.path = "POST", PathIntrospect
			if c.req.form == nil {
				c.req.form = url.Values{}
			}
			c.req.form.Set("token", c.token)
			rec := bcDo(t, h, c.req)
			if rec.Code != http.StatusOK {
				t.Fatalf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
			}
			for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
			if c.want == nil {
				if got := rec.Body.String(); got != `{"active":false}` {
					t.Errorf("got %q, want %q", got, `{"active":false}`)
				}
				return
			}
			var got map[string]any
			json.Unmarshal(rec.Body.Bytes(), &got)
			if g, w := bcKeys(got), "active,client_id,exp,organization_id,scope,sid,sub"; g != w {
				t.Errorf("members: got %q, want %q", g, w)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s: got %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// TestIntrospectInactive: every token that stopped being honoured is
// {"active":false} with 200, never an error status.
func TestIntrospectInactive(t *testing.T) {
	h := newHarness(t)
	revoked := bcTokens(t, h, hConfidential, hSecret)
	code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
	ended := bcExchangeOK(t, h, hConfidential, hSecret, code)
	sibling := bcTokens(t, h, hSiblingApp, hSiblingSec, "openid")
	expiring := bcTokens(t, h, hConfidential, hSecret)

	bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: hConfidential, pass: hSecret, form: url.Values{"token": {revoked.AccessToken}}})
	c := h.issuedCode(code)
	bcApply(t, h, fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: c.SSOSessionID, At: h.clock.Now(), Reason: fsm.EndLogout})
	bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.Suspended = true })

	for _, c := range []struct{ name, token string }{
		{"revoked", revoked.AccessToken},
		{"app session ended", ended.AccessToken},
		{"minting app suspended", sibling.AccessToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := bcIntrospect(t, h, hConfidential, hSecret, c.token); len(got) != 1 || got["active"] != false {
				t.Errorf("got %v, want {active:false}", got)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		if got := bcIntrospect(t, h, hConfidential, hSecret, expiring.AccessToken); got["active"] != true {
			t.Fatalf("before expiry: got %v, want active", got)
		}
		h.clock.Add(11 * time.Minute)
		if got := bcIntrospect(t, h, hConfidential, hSecret, expiring.AccessToken); len(got) != 1 || got["active"] != false {
			t.Errorf("after expiry: got %v, want {active:false}", got)
		}
	})
}

// TestIntrospectRevokeErrors covers the error answers of both endpoints.
func TestIntrospectRevokeErrors(t *testing.T) {
	h := newHarness(t)
	tok := bcTokens(t, h, hConfidential, hSecret)
	raw := func(s string) *string { return &s }
	cases := []struct {
		name   string
		req    bcReq
		status int
		code   string
	}{
		{"no client authentication", bcReq{form: url.Values{"token": {tok.AccessToken}}}, 401, "invalid_client"},
		{"wrong secret", bcReq{user: hConfidential, pass: "wrong", form: url.Values{"token": {tok.AccessToken}}}, 401, "invalid_client"},
		{"unknown client", bcReq{form: url.Values{"client_id": {"nobody"}, "client_secret": {"x"}, "token": {tok.AccessToken}}}, 401, "invalid_client"},
		{"public client", bcReq{form: url.Values{"client_id": {hPublic}, "token": {tok.AccessToken}}}, 401, "invalid_client"},
		{"public client with a secret", bcReq{form: url.Values{"client_id": {hPublic}, "client_secret": {"x"}, "token": {tok.AccessToken}}}, 401, "invalid_client"},
		{"public client over basic", bcReq{user: hPublic, form: url.Values{"token": {tok.AccessToken}}}, 401, "invalid_client"},
		{"missing token", bcReq{user: hConfidential, pass: hSecret, form: url.Values{}}, 400, "invalid_request"},
		{"empty token", bcReq{user: hConfidential, pass: hSecret, form: url.Values{"token": {""}}}, 400, "invalid_request"},
		{"repeated token", bcReq{user: hConfidential, pass: hSecret, body: raw("token=a&token=b")}, 400, "invalid_request"},
		{"malformed body", bcReq{user: hConfidential, pass: hSecret, body: raw("token=%zz")}, 400, "invalid_request"},
		{"json body", bcReq{user: hConfidential, pass: hSecret, body: raw(`{"token":"x"}`), contentType: "application/json"}, 400, "invalid_request"},
		{"basic and client_secret", bcReq{user: hConfidential, pass: hSecret, form: url.Values{"client_secret": {hSecret}, "token": {"x"}}}, 400, "invalid_request"},
	}
	for _, path := range []string{PathIntrospect, PathRevoke} {
		for _, c := range cases {
			t.Run(path+" "+c.name, func(t *testing.T) {
				c.req.method, c.req.path = "POST", path
				rec := bcDo(t, h, c.req)
				bcOAuthError(t, rec, c.status, c.code)
				wantChallenge := ""
				if c.status == 401 && c.req.user != "" {
					wantChallenge = `Basic realm="oidcd"`
				}
				if got := rec.Header().Get("WWW-Authenticate"); got != wantChallenge {
					t.Errorf("WWW-Authenticate: got %q, want %q", got, wantChallenge)
				}
			})
		}
	}
	t.Run("nothing was revoked", func(t *testing.T) {
		if got := bcUserinfoStatus(t, h, tok.AccessToken); got != http.StatusOK {
			t.Errorf("got %d, want 200", got)
		}
	})
	t.Run("introspect with the store closed", func(t *testing.T) {
		h.applier.FSM.Close()
		bcOAuthError(t, bcDo(t, h, bcReq{method: "POST", path: PathIntrospect, user: hConfidential, pass: hSecret,
			form: url.Values{"token": {tok.AccessToken}}}), 500, "server_error")
	})
}
