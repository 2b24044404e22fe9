package oidc

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// benchScopes are the scopes of the benchmarks' codes.
var benchScopes = []string{"openid", "email"}

// BenchmarkTokenExchange: the token endpoint end to end (parse, client
// authentication, code read, two RS256 signatures, one FSM write). Issuing
// the code is outside the timer.
func BenchmarkTokenExchange(b *testing.B) {
	for _, c := range []struct{ name, client, secret string }{
		{"public", hPublic, ""},
		{"confidential", hConfidential, hSecret}, // plus the client secret check (SHA-256)
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				code := h.signedInCode(c.client, hUser, hOrgA, benchScopes, "", bcVerifier)
				b.StartTimer()
				if rec := bcExchange(b, h, c.client, c.secret, code); rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkUserinfo: the bearer hot path (RS256 verify, claims, one
// read transaction).
func BenchmarkUserinfo(b *testing.B) {
	h := newHarness(b)
	req := httptest.NewRequest(http.MethodGet, PathUserinfo, nil)
	req.Header.Set("Authorization", "Bearer "+bcTokens(b, h, hPublic, "", benchScopes...).AccessToken)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.srv.Config.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkIntrospect: client authentication (SHA-256 of the secret) plus
// the bearer checks.
func BenchmarkIntrospect(b *testing.B) {
	h := newHarness(b)
	r := bcReq{method: http.MethodPost, path: PathIntrospect, user: hConfidential, pass: hSecret,
		form: url.Values{"token": {bcTokens(b, h, hPublic, "", benchScopes...).AccessToken}}}
	b.ReportAllocs()
	for b.Loop() {
		if rec := bcDo(b, h, r); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"active":true`) {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
