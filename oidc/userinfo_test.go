package oidc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/keys"
)

func TestUserinfo(t *testing.T) {
	h := newHarness(t)
	withEmail := bcTokens(t, h, hConfidential, hSecret, "openid", "email")
	without := bcTokens(t, h, hConfidential, hSecret, "openid", "profile")
	cases := []struct {
		name, method, auth, token string
		want                      map[string]any
	}{
		{"GET with email", "GET", "Bearer", withEmail.AccessToken,
			map[string]any{"sub": hUser, "organization_id": hOrgA, "email": hEmail, "email_verified": true}},
		{"POST with email", "POST", "Bearer", withEmail.AccessToken,
			map[string]any{"sub": hUser, "organization_id": hOrgA, "email": hEmail, "email_verified": true}},
		{"without email scope", "GET", "Bearer", without.AccessToken,
			map[string]any{"sub": hUser, "organization_id": hOrgA}},
		{"scheme in lower case", "GET", "bearer", without.AccessToken,
			map[string]any{"sub": hUser, "organization_id": hOrgA}},
		{"scheme in upper case", "POST", "BEARER", without.AccessToken,
			map[string]any{"sub": hUser, "organization_id": hOrgA}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := bcDo(t, h, bcReq{method: c.method, path: PathUserinfo, auth: c.auth + " " + c.token})
			if rec.Code != http.StatusOK {
				t.Fatalf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
			}
			for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
			var got map[string]any
			json.Unmarshal(rec.Body.Bytes(), &got)
			if bcKeys(got) != bcKeys(c.want) {
				t.Errorf("members: got %q, want %q", bcKeys(got), bcKeys(c.want))
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s: got %v, want %v", k, got[k], v)
				}
			}
		})
	}
	t.Run("email is read live", func(t *testing.T) {
		email, verified := "ann.new@example.com", false
		bcApply(t, h, fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUser, Email: &email, EmailVerified: &verified, At: h.clock.Now()})
		rec := bcDo(t, h, bcReq{method: "GET", path: PathUserinfo, bearer: withEmail.AccessToken})
		if got, want := rec.Body.String(), `{"sub":"`+hUser+`","organization_id":"`+hOrgA+`","email":"ann.new@example.com","email_verified":false}`; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// TestBearerRejects runs every kind of bad bearer token against GET and POST
// /userinfo and the membership list: one answer for every problem.
func TestBearerRejects(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	valid := bcTokens(t, h, hConfidential, hSecret)
	claims := bcAccessClaims(t, h, valid.AccessToken)
	sign := func(mutate func(c map[string]any)) string {
		c := map[string]any{}
		for k, v := range claims {
			c[k] = v
		}
		mutate(c)
		tok, err := h.keys.Sign(c, keys.TypJWT)
		if err != nil {
			t.Fatal(err)
		}
		return string(tok)
	}
	// A key set that is not ours.
	otherApplier := fsmtest.New(t)
	other := keys.New(keys.Config{State: otherApplier.State(), Applier: otherApplier, Now: h.clock.Now})
	if err := other.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Sign(claims, keys.TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(valid.AccessToken, ".")
	tampered := parts[0] + "." + parts[1] + "." + flipMiddle(parts[2])
	b64 := base64.RawURLEncoding.EncodeToString
	payload, _ := json.Marshal(claims)
	algNone := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(payload) + "."
	hs256 := b64([]byte(`{"alg":"HS256","typ":"JWT","kid":"`+bcHeader(t, valid.AccessToken)["kid"]+`"}`)) + "." + b64(payload) + "." + b64([]byte("sig"))

	// Tokens whose state changes below.
	revoked := bcTokens(t, h, hConfidential, hSecret)
	endedCode := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
	ended := bcExchangeOK(t, h, hConfidential, hSecret, endedCode)
	suspendedApp := bcTokens(t, h, hSiblingApp, hSiblingSec, "openid")
	memberB := bcMultiToken(t, h, hOrgB)
	bcApply(t, h, fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: "2c000000-0000-4000-8000-000000000003", UserID: hUser, OrgID: hOrgC, Status: fsm.MembershipActive}})
	orgC := bcMultiToken(t, h, hOrgC)

	if rec := bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: hConfidential, pass: hSecret, form: map[string][]string{"token": {revoked.AccessToken}}}); rec.Code != http.StatusOK {
		t.Fatalf("revoke: got %d", rec.Code)
	}
	sso := h.issuedCode(endedCode)
	bcApply(t, h, fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: sso.SSOSessionID, At: now, Reason: fsm.EndLogout})
	bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.Suspended = true })
	bcApply(t, h, fsm.TypeUpdateMembership, fsm.UpdateMembership{ID: hMemB, Status: fsm.MembershipSuspended, At: now})
	bcApply(t, h, fsm.TypeDeleteOrg, fsm.DeleteOrg{ID: hOrgC, At: now})

	cases := []struct{ name, auth string }{
		{"no header", ""},
		{"basic scheme", "Basic Y29uZi1hcHA6c2VjcmV0"},
		{"scheme only", "Bearer"},
		{"empty token", "Bearer "},
		{"token with a space", "Bearer " + valid.AccessToken + " x"},
		{"token in another scheme", "Token " + valid.AccessToken},
		{"garbage", "Bearer abc"},
		{"two dots of garbage", "Bearer a.b.c"},
		{"tampered signature", "Bearer " + tampered},
		{"foreign key", "Bearer " + string(foreign)},
		{"alg none", "Bearer " + algNone},
		{"alg HS256", "Bearer " + hs256},
		{"other issuer", "Bearer " + sign(func(c map[string]any) { c["iss"] = "https://evil.example" })},
		{"issuer with a slash", "Bearer " + sign(func(c map[string]any) { c["iss"] = h.p.cfg.Issuer + "/" })},
		{"expired", "Bearer " + sign(func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() })},
		{"no exp", "Bearer " + sign(func(c map[string]any) { delete(c, "exp") })},
		{"no scp", "Bearer " + sign(func(c map[string]any) { delete(c, "scp") })},
		{"scp a string", "Bearer " + sign(func(c map[string]any) { c["scp"] = "openid" })},
		{"scp with a number", "Bearer " + sign(func(c map[string]any) { c["scp"] = []any{"openid", 1} })},
		{"scp null", "Bearer " + sign(func(c map[string]any) { c["scp"] = nil })},
		{"sid a number", "Bearer " + sign(func(c map[string]any) { c["sid"] = 7 })},
		{"empty organization_id", "Bearer " + sign(func(c map[string]any) { c["organization_id"] = "" })},
		{"exp a string", "Bearer " + sign(func(c map[string]any) { c["exp"] = fmt.Sprint(now.Add(time.Hour).Unix()) })},
		{"exp negative", "Bearer " + sign(func(c map[string]any) { c["exp"] = -1 })},
		{"exp fractional, past", "Bearer " + sign(func(c map[string]any) { c["exp"] = float64(now.Unix()) - 9.5 })},
		{"aud a string", "Bearer " + sign(func(c map[string]any) { c["aud"] = hConfidential })},
		{"no jti", "Bearer " + sign(func(c map[string]any) { delete(c, "jti") })},
		{"no sid", "Bearer " + sign(func(c map[string]any) { delete(c, "sid") })},
		{"unknown sid", "Bearer " + sign(func(c map[string]any) { c["sid"] = authn.NewID() })},
		{"another sub", "Bearer " + sign(func(c map[string]any) { c["sub"] = hUserB })},
		{"with an audience", "Bearer " + sign(func(c map[string]any) { c["aud"] = []string{hConfidential} })},
		{"id token", "Bearer " + valid.IDToken},
		{"logout token", "Bearer " + sign(func(c map[string]any) {
			delete(c, "scp")
			c["aud"] = hConfidential
			c["events"] = map[string]any{"http://schemas.openid.net/event/backchannel-logout": map[string]any{}}
		})},
		{"revoked", "Bearer " + revoked.AccessToken},
		{"app session ended", "Bearer " + ended.AccessToken},
		{"client suspended", "Bearer " + suspendedApp.AccessToken},
		{"membership suspended", "Bearer " + memberB.AccessToken},
		{"organization deleted", "Bearer " + orgC.AccessToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bcInvalidToken(t, bcDo(t, h, bcReq{method: "GET", path: PathUserinfo, auth: c.auth}), true)
			bcInvalidToken(t, bcDo(t, h, bcReq{method: "POST", path: PathUserinfo, auth: c.auth}), false)
			bcInvalidToken(t, bcDo(t, h, bcReq{method: "GET", path: PathMemberships, auth: c.auth}), true)
		})
	}
	t.Run("the valid token still works", func(t *testing.T) {
		if got := bcUserinfoStatus(t, h, valid.AccessToken); got != http.StatusOK {
			t.Errorf("got %d, want 200", got)
		}
	})
	// Spellings of the same claims that are still an access token.
	for name, mutate := range map[string]func(c map[string]any){
		"aud null":          func(c map[string]any) { c["aud"] = nil },
		"no aud":            func(c map[string]any) { delete(c, "aud") },
		"exp fractional":    func(c map[string]any) { c["exp"] = float64(now.Unix()) + 60.5 },
		"an unknown claim":  func(c map[string]any) { c["x-extra"] = map[string]any{"a": 1} },
		"scp an empty list": func(c map[string]any) { c["scp"] = []string{} },
	} {
		t.Run("accepted: "+name, func(t *testing.T) {
			if got := bcUserinfoStatus(t, h, sign(mutate)); got != http.StatusOK {
				t.Errorf("got %d, want 200", got)
			}
		})
	}
}

func TestBearerExpiry(t *testing.T) {
	h := newHarness(t)
	start := h.clock.Now()
	tok := bcTokens(t, h, hPublic, "")
	for _, c := range []struct {
		after time.Duration
		want  int
	}{
		{599 * time.Second, http.StatusOK},
		{(600 + 4) * time.Second, http.StatusOK}, // within the 5 s of clock skew
		{(600 + 5) * time.Second, http.StatusUnauthorized},
	} {
		h.clock.Add(c.after - h.clock.Now().Sub(start))
		if got := bcUserinfoStatus(t, h, tok.AccessToken); got != c.want {
			t.Errorf("after %v: got %d, want %d", c.after, got, c.want)
		}
	}
}

func TestBearerStoreFault(t *testing.T) {
	h := newHarness(t)
	tok := bcTokens(t, h, hPublic, "")
	h.applier.FSM.Close()
	rec := bcDo(t, h, bcReq{method: "GET", path: PathUserinfo, bearer: tok.AccessToken})
	if rec.Code != 500 || rec.Body.String() != `{"error":"server_error"}` {
		t.Errorf("GET: got %d %q, want 500 %q", rec.Code, rec.Body, `{"error":"server_error"}`)
	}
	rec = bcDo(t, h, bcReq{method: "POST", path: PathUserinfo, bearer: tok.AccessToken})
	if rec.Code != 500 || rec.Body.Len() != 0 {
		t.Errorf("POST: got %d %q, want 500 and no body", rec.Code, rec.Body)
	}
	bcEnvelope(t, bcDo(t, h, bcReq{method: "GET", path: PathMemberships, bearer: tok.AccessToken}), 500, "INTERNAL_ERROR")
}

// bcAccessClaims returns the claims of an access token as a map.
func bcAccessClaims(t *testing.T, h *harness, token string) map[string]any {
	t.Helper()
	payload, err := h.keys.Verify([]byte(token))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(payload, &out); err != nil {
		t.Fatal(err)
	}
	out["aud"] = []string{}
	return out
}

// bcExchangeOK exchanges code and fails t unless it works.
func bcExchangeOK(t *testing.T, h *harness, clientID, secret, code string) tokenResponse {
	t.Helper()
	rec := bcExchange(t, h, clientID, secret, code)
	if rec.Code != http.StatusOK {
		t.Fatalf("token: got %d %s, want 200", rec.Code, rec.Body)
	}
	var out tokenResponse
	json.Unmarshal(rec.Body.Bytes(), &out)
	return out
}

// bcMultiToken signs hUser in to org through the multi-organization app.
func bcMultiToken(t *testing.T, h *harness, org string) tokenResponse {
	t.Helper()
	return bcExchangeOK(t, h, hMulti, "", h.signedInCode(hMulti, hUser, org, []string{"openid"}, "", bcVerifier))
}

// flipMiddle changes a character in the middle of a base64url string
// (the last one may carry only padding bits).
func flipMiddle(s string) string {
	i := len(s) / 2
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}
