package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oidcd/oidcd/internal/authn"
)

// BenchmarkCredential is what resolving each kind of credential costs per
// request, through the whole API handler on a route that reads only this
// node (GET /status: no read index, so the figures are the check alone
// plus the same handler work in every row): the break-glass token
// (a SHA-256 and a constant-time compare), an API key (a record read by
// its id, then the same), and a person's access token (the provider's
// check, here a fake answering at once, then the person's grants read).
// On a cluster the key and the person also wait for one read index,
// which the route's own linearizable read then reuses.
func BenchmarkCredential(b *testing.B) {
	people := &fakePeople{}
	e := newEnv(b, withPeople(people, authn.ACRMFA))
	ada := e.createUser(`{"email":"ada@example.com"}`)
	e.createGrant(`{"user_id":"` + ada.ID + `","role":"admin"}`)
	people.set("person-token", PersonToken{Active: true, Sub: ada.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	// A year: the test clock moves a second at each reading.
	k := e.createKey(`{"name":"bench","role":"auditor","expires_in":31536000}`)
	for _, bc := range []struct{ name, bearer string }{
		{"token", e.token},
		{"api key", k.Key},
		{"person", "person-token"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", Prefix+"/status", nil)
			r.Header.Set("Authorization", "Bearer "+bc.bearer)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				e.h.ServeHTTP(w, r)
				if w.code != 0 && w.code != http.StatusOK {
					b.Fatalf("got %d", w.code)
				}
			}
		})
	}
}
