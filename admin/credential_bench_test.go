package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oidcd/oidcd/fsm"
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
// which the route's own linearizable read then reuses. A key that records
// its maker reads, in the same read, the keys that made it and the first
// maker's grants (fsm.APIKeyLineage).
func BenchmarkCredential(b *testing.B) {
	people := &fakePeople{}
	e := newEnv(b, withPeople(people, authn.ACRMFA))
	ada := e.createUser(`{"email":"ada@example.com"}`)
	e.createGrant(`{"user_id":"` + ada.ID + `","role":"admin"}`)
	people.set("person-token", PersonToken{Active: true, Sub: ada.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	// A year: the test clock moves a second at each reading.
	k := e.createKey(`{"name":"bench","role":"auditor","expires_in":31536000}`)
	// Keys that record a maker: the maker's standing is read with the key
	// (the person's grants; each key of the line).
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		b.Fatal(err)
	}
	keyAs := func(bearer, role string) APIKey {
		w := e.do("POST", "/admin/v1/api-keys", `{"name":"bench","role":"`+role+`","expires_in":31536000}`, bearerHdr(bearer)...)
		if w.Code != 201 {
			b.Fatalf("POST /api-keys: got %d %s", w.Code, w.Body)
		}
		return decodeAs[APIKey](b, w)
	}
	byPerson := keyAs("person-token", "admin")
	byKey := keyAs(byPerson.Key, "auditor")
	for _, bc := range []struct{ name, bearer string }{
		{"token", e.token},
		{"api key", k.Key},
		{"api key of a person", byPerson.Key},
		{"api key of a person's key", byKey.Key},
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
