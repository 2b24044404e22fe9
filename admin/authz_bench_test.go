package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discardWriter is a ResponseWriter that keeps nothing but the status.
type discardWriter struct {
	h    http.Header
	code int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }

// BenchmarkAuthorize is the cost of the authorization decision per
// request, beside the same request served without it ("none"): a mux
// with one route whose handler does nothing, so what differs is
// authorize alone. The admin's GET decides from the role; the org_admin's
// GET of an organization from the path; its change of a person reads
// the person's memberships; its change of a client reads the client and
// decodes the body (twice in all, with the handler's own decode).
func BenchmarkAuthorize(b *testing.B) {
	s := newScene(b)
	a := s.bareAPI()
	noop := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }
	for _, bc := range []struct {
		name, method, path, url, body string
		c                             Credential
		none                          bool
	}{
		{"none", "GET", "/organizations/{id}", "/organizations/" + s.o.ID, "", asAdmin, true},
		{"admin GET", "GET", "/organizations/{id}", "/organizations/" + s.o.ID, "", asAdmin, false},
		{"org_admin GET org", "GET", "/organizations/{id}", "/organizations/" + s.o.ID, "", orgAdmin(s.o.ID), false},
		{"org_admin GET person", "GET", "/users/{id}", "/users/" + s.alice.ID, "", orgAdmin(s.o.ID), false},
		{"admin PATCH person", "PATCH", "/users/{id}", "/users/" + s.alice.ID, `{"phone":"+15550100002"}`, asAdmin, false},
		{"org_admin PATCH person", "PATCH", "/users/{id}", "/users/" + s.alice.ID, `{"phone":"+15550100002"}`, orgAdmin(s.o.ID), false},
		{"org_admin PATCH client", "PATCH", "/clients/{id}", "/clients/app-o", `{"name":"Renamed"}`, orgAdmin(s.o.ID), false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := http.HandlerFunc(noop)
			if !bc.none {
				h = a.authorize(bc.method, bc.path, noop)
			}
			mux := http.NewServeMux()
			mux.Handle(bc.method+" "+Prefix+bc.path, h)
			r := httptest.NewRequest(bc.method, Prefix+bc.url, nil)
			r.Header.Set("Content-Type", "application/json")
			r = r.WithContext(WithCredential(r.Context(), bc.c))
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				if bc.body != "" {
					r.Body = io.NopCloser(strings.NewReader(bc.body))
				}
				w.code = 0
				mux.ServeHTTP(w, r)
				if w.code != 200 {
					b.Fatalf("got %d", w.code)
				}
			}
		})
	}
}
