package oidc

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestRevoke(t *testing.T) {
	h := newHarness(t)
	revokeAs := func(t *testing.T, client, secret, token string) {
		t.Helper()
		rec := bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: client, pass: secret, form: url.Values{"token": {token}}})
		if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
			t.Fatalf("revoke: got %d %q, want 200 and no body", rec.Code, rec.Body)
		}
	}
	active := func(t *testing.T, token string) bool {
		t.Helper()
		got := bcIntrospect(t, h, hConfidential, hSecret, token)
		return got["active"] == true
	}

	t.Run("own token; the app session lives on", func(t *testing.T) {
		code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
		first := bcExchangeOK(t, h, hConfidential, hSecret, code)
		second := bcExchangeOK(t, h, hConfidential, hSecret, bcSecondCode(t, h, code))
		if a, b := bcClaims(t, first.AccessToken)["sid"], bcClaims(t, second.AccessToken)["sid"]; string(a) != string(b) {
			t.Fatalf("sid: got %s and %s, want one app session", a, b)
		}
		revokeAs(t, hConfidential, hSecret, first.AccessToken)
		if got := bcUserinfoStatus(t, h, first.AccessToken); got != http.StatusUnauthorized {
			t.Errorf("userinfo, revoked: got %d, want 401", got)
		}
		if active(t, first.AccessToken) {
			t.Errorf("introspect, revoked: got active, want inactive")
		}
		if got := bcUserinfoStatus(t, h, second.AccessToken); got != http.StatusOK {
			t.Errorf("userinfo, other token of the session: got %d, want 200", got)
		}
		revokeAs(t, hConfidential, hSecret, first.AccessToken) // again: still 200
	})
	t.Run("another organization's app changes nothing", func(t *testing.T) {
		tok := bcTokens(t, h, hConfidential, hSecret)
		revokeAs(t, hOtherOrgApp, hOtherSecret, tok.AccessToken)
		if !active(t, tok.AccessToken) {
			t.Errorf("got inactive, want active")
		}
	})
	t.Run("same-owner sibling app revokes", func(t *testing.T) {
		tok := bcTokens(t, h, hConfidential, hSecret)
		revokeAs(t, hSiblingApp, hSiblingSec, tok.AccessToken)
		if active(t, tok.AccessToken) {
			t.Errorf("got active, want inactive")
		}
	})
	t.Run("an id token revokes nothing", func(t *testing.T) {
		tok := bcTokens(t, h, hConfidential, hSecret)
		revokeAs(t, hConfidential, hSecret, tok.IDToken)
		if !active(t, tok.AccessToken) {
			t.Errorf("got inactive, want active")
		}
	})
	t.Run("garbage", func(t *testing.T) {
		revokeAs(t, hConfidential, hSecret, "garbage")
	})
	t.Run("expired token needs no revocation", func(t *testing.T) {
		tok := bcTokens(t, h, hConfidential, hSecret)
		jti := bcAccessClaims(t, h, tok.AccessToken)["jti"].(string)
		h.clock.Add(11 * time.Minute)
		revokeAs(t, hConfidential, hSecret, tok.AccessToken)
		if done, _ := h.applier.State().Revoked(jti); done {
			t.Errorf("revoked: got true, want false")
		}
	})
	t.Run("store unavailable", func(t *testing.T) {
		tok := bcTokens(t, h, hConfidential, hSecret)
		h.applier.Fail = errors.New("no leader")
		rec := bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: hConfidential, pass: hSecret, form: url.Values{"token": {tok.AccessToken}}})
		h.applier.Fail = nil
		bcOAuthError(t, rec, http.StatusServiceUnavailable, "temporarily_unavailable")
		if !active(t, tok.AccessToken) {
			t.Errorf("got inactive, want active")
		}
	})
}
