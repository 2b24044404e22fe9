package oidc

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkPreflight: a CORS preflight of the token endpoint, granted and
// refused, through the same handler as BenchmarkUserinfo: one lookup in
// the in-memory index of web origins, no record read, no write. Run it
// beside BenchmarkUserinfo and BenchmarkUserinfoCORS:
//
//	go test -run '^$' -bench 'Preflight|Userinfo' -benchmem ./oidc/
func BenchmarkPreflight(b *testing.B) {
	for _, c := range []struct{ name, origin, want string }{
		{"granted", appOrigin, appOrigin},
		{"unlisted", evilOrigin, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newCORSHarness(b)
			h.applier.FSM.OnApply = h.p.OnApply // as node wires it
			h.p.OnApply(nil)
			req := httptest.NewRequest(http.MethodOptions, PathToken, nil)
			req.Header.Set("Origin", c.origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "content-type")
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.srv.Config.Handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != c.want {
					b.Fatalf("%d %q", rec.Code, rec.Header())
				}
			}
		})
	}
}

// BenchmarkUserinfoCORS: BenchmarkUserinfo from a page on an origin the
// token's client lists: the grant costs one more lookup by client id.
func BenchmarkUserinfoCORS(b *testing.B) {
	h := newCORSHarness(b)
	h.applier.FSM.OnApply = h.p.OnApply
	h.p.OnApply(nil)
	req := httptest.NewRequest(http.MethodGet, PathUserinfo, nil)
	req.Header.Set("Authorization", "Bearer "+bcTokens(b, h, hPublic, "", benchScopes...).AccessToken)
	req.Header.Set("Origin", appOrigin)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.srv.Config.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Header().Get("Access-Control-Allow-Origin") != appOrigin {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
