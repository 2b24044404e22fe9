package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/fsm"
)

// bcMountDiscovery serves discovery and the key set on the harness's
// server so that go-oidc can find them.
func bcMountDiscovery(h *harness) {
	mux := h.srv.Config.Handler.(*http.ServeMux)
	mux.Handle("GET "+PathDiscovery, DiscoveryHandler(h.p.cfg.Issuer))
	mux.Handle("GET "+PathJWKS, JWKSHandler(h.keys, nil))
}

// TestEndToEnd drives the token side with the clients relying parties
// use: golang.org/x/oauth2 for the exchange, go-oidc to verify the ID
// token and read userinfo.
func TestEndToEnd(t *testing.T) {
	h := newHarness(t)
	bcMountDiscovery(h)
	ctx := context.Background()
	provider, err := gooidc.NewProvider(ctx, h.p.cfg.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, clientID, secret string
		style                  oauth2.AuthStyle
		verifierOpt            func(string) oauth2.AuthCodeOption
	}{
		{"confidential, basic", hConfidential, hSecret, oauth2.AuthStyleInHeader, oauth2.VerifierOption},
		{"confidential, post", hConfidential, hSecret, oauth2.AuthStyleInParams, oauth2.VerifierOption},
		{"public", hPublic, "", oauth2.AuthStyleInParams,
			func(v string) oauth2.AuthCodeOption { return oauth2.SetAuthURLParam("code_verifier", v) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const nonce = "nonce-e2e-0123456789"
			verifier := oauth2.GenerateVerifier()
			code := h.signedInCode(c.clientID, hUser, hOrgA, []string{"openid", "email"}, nonce, verifier)
			cfg := oauth2.Config{ClientID: c.clientID, ClientSecret: c.secret, RedirectURL: hRedirect,
				Endpoint: oauth2.Endpoint{TokenURL: provider.Endpoint().TokenURL, AuthStyle: c.style}}
			tok, err := cfg.Exchange(ctx, code, c.verifierOpt(verifier))
			if err != nil {
				t.Fatal(err)
			}
			if tok.Type() != "Bearer" || tok.Expiry.IsZero() {
				t.Errorf("got type %q expiry %v, want Bearer and an expiry", tok.Type(), tok.Expiry)
			}
			rawID, _ := tok.Extra("id_token").(string)
			idt, err := provider.Verifier(&gooidc.Config{ClientID: c.clientID, Now: h.clock.Now}).Verify(ctx, rawID)
			if err != nil {
				t.Fatalf("verify id token: %v", err)
			}
			if idt.Nonce != nonce || idt.Subject != hUser || len(idt.Audience) != 1 || idt.Audience[0] != c.clientID {
				t.Errorf("got nonce %q sub %q aud %v, want %q %q [%s]", idt.Nonce, idt.Subject, idt.Audience, nonce, hUser, c.clientID)
			}
			if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
				t.Errorf("at_hash: %v", err)
			}
			// Another client does not accept it.
			if _, err := provider.Verifier(&gooidc.Config{ClientID: hOtherOrgApp, Now: h.clock.Now}).Verify(ctx, rawID); err == nil {
				t.Errorf("verified for another client_id, want an error")
			}
			// The access token validates locally too: a JWT with an empty aud.
			at, err := provider.Verifier(&gooidc.Config{SkipClientIDCheck: true, Now: h.clock.Now}).Verify(ctx, tok.AccessToken)
			if err != nil {
				t.Fatalf("verify access token locally: %v", err)
			}
			var claims map[string]any
			at.Claims(&claims)
			if aud, ok := claims["aud"].([]any); !ok || len(aud) != 0 {
				t.Errorf("access aud: got %#v, want []", claims["aud"])
			}
			for _, k := range []string{"client_id", "azp"} {
				if _, ok := claims[k]; ok {
					t.Errorf("access token has %s", k)
				}
			}
			ui, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
			if err != nil {
				t.Fatal(err)
			}
			if ui.Subject != hUser || ui.Email != hEmail || !ui.EmailVerified {
				t.Errorf("userinfo: got %q %q %v, want %q %q true", ui.Subject, ui.Email, ui.EmailVerified, hUser, hEmail)
			}
			// The code is single-use; its replay revokes this token.
			_, err = cfg.Exchange(ctx, code, c.verifierOpt(verifier))
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
				t.Fatalf("replay: got %v, want invalid_grant", err)
			}
			if _, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil {
				t.Errorf("userinfo after replay: got no error, want 401")
			}
		})
	}
	t.Run("wrong secret", func(t *testing.T) {
		code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
		cfg := oauth2.Config{ClientID: hConfidential, ClientSecret: "wrong", RedirectURL: hRedirect,
			Endpoint: oauth2.Endpoint{TokenURL: provider.Endpoint().TokenURL, AuthStyle: oauth2.AuthStyleInHeader}}
		_, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(bcVerifier))
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "invalid_client" || re.Response.StatusCode != http.StatusUnauthorized {
			t.Errorf("got %v, want 401 invalid_client", err)
		}
	})
	t.Run("suspended client", func(t *testing.T) {
		tok := bcTokens(t, h, hSiblingApp, hSiblingSec, "openid")
		bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.Suspended = true })
		defer bcSetClient(t, h, hSiblingApp, func(c *fsm.Client) { c.Suspended = false })
		if got := bcUserinfoStatus(t, h, tok.AccessToken); got != http.StatusUnauthorized {
			t.Errorf("userinfo: got %d, want 401", got)
		}
		if got := bcIntrospect(t, h, hConfidential, hSecret, tok.AccessToken); got["active"] != false {
			t.Errorf("introspect: got %v, want inactive", got)
		}
		code := h.signedInCode(hSiblingApp, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
		bcOAuthError(t, bcExchange(t, h, hSiblingApp, hSiblingSec, code), http.StatusUnauthorized, "invalid_client")
	})
	t.Run("over the wire: headers of a 401", func(t *testing.T) {
		for _, method := range []string{"GET", "POST"} {
			req, _ := http.NewRequest(method, h.p.cfg.Issuer+PathUserinfo, nil)
			req.Header.Set("Authorization", "Bearer nope")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := `{"error":"invalid_token"}`
			if method == "POST" {
				want = ""
			}
			if resp.StatusCode != 401 || string(body) != want ||
				resp.Header.Get("WWW-Authenticate") != `Bearer error="invalid_token"` ||
				resp.Header.Get("Content-Type") != "application/json;charset=UTF-8" {
				t.Errorf("%s: got %d %q %v, want 401 %q with WWW-Authenticate: Bearer error=\"invalid_token\" and Content-Type application/json;charset=UTF-8", method, resp.StatusCode, body, resp.Header, want)
			}
		}
	})
	t.Run("over the wire: introspection", func(t *testing.T) {
		tok := bcTokens(t, h, hConfidential, hSecret)
		req, _ := http.NewRequest("POST", h.p.cfg.Issuer+PathIntrospect, strings.NewReader(url.Values{"token": {tok.AccessToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(hSiblingApp, hSiblingSec)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]any
		json.NewDecoder(resp.Body).Decode(&got)
		if resp.StatusCode != 200 || got["active"] != true || got["client_id"] != hConfidential {
			t.Errorf("got %d %v, want 200 active for %s", resp.StatusCode, got, hConfidential)
		}
	})
}
