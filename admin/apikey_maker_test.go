package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// makerEnv is an API at the newest state format (a cluster of one
// build), with people's tokens and a read index counted: an org O, an
// admin person ada and an org_admin of O, olga, each signed in with a
// second factor.
type makerEnv struct {
	*env
	ri                  *readIndexCounter
	people              *fakePeople
	org                 Org
	ada, olga           User
	adaGrant, olgaGrant Grant
}

const (
	adaToken  = "ada-token"
	olgaToken = "olga-token"
	aYear     = 31536000
)

func newMakerEnv(t *testing.T) *makerEnv {
	t.Helper()
	ri := &readIndexCounter{}
	people := &fakePeople{}
	e := &makerEnv{env: newEnv(t, withReadIndex(ri), withPeople(people, "")), ri: ri, people: people}
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	e.org = e.createOrg("o")
	e.ada = e.createUser(`{"email":"ada@example.com"}`)
	e.olga = e.createUser(`{"email":"olga@example.com"}`)
	e.createMembership(e.olga.ID, e.org.ID)
	e.adaGrant = e.createGrant(`{"user_id":"` + e.ada.ID + `","role":"admin"}`)
	e.olgaGrant = e.createGrant(`{"user_id":"` + e.olga.ID + `","role":"org_admin","organization_id":"` + e.org.ID + `"}`)
	people.set(adaToken, PersonToken{Active: true, Sub: e.ada.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	people.set(olgaToken, PersonToken{Active: true, Sub: e.olga.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	return e
}

// keyAs creates an API key with bearer and fails unless it is made.
func (e *makerEnv) keyAs(bearer, body string) APIKey {
	e.t.Helper()
	w := e.do("POST", "/admin/v1/api-keys", body, bearerHdr(bearer)...)
	if w.Code != 201 {
		e.t.Fatalf("POST /api-keys: got %d %s, want 201", w.Code, w.Body)
	}
	return decodeAs[APIKey](e.t, w)
}

func (e *makerEnv) orgAdminKeyBody(name string) string {
	return fmt.Sprintf(`{"name":%q,"role":"org_admin","organization_id":%q,"expires_in":%d}`, name, e.org.ID, aYear)
}

// rename is what the key still did after its grant was gone:
// PATCH /organizations/O.
func (e *makerEnv) rename(bearer string) int {
	e.t.Helper()
	return e.do("PATCH", "/admin/v1/organizations/"+e.org.ID, `{"name":"Renamed `+bearer[len(bearer)-4:]+`"}`, bearerHdr(bearer)...).Code
}

// listedKeys is GET /api-keys by id.
func (e *makerEnv) listedKeys() map[string]APIKey {
	e.t.Helper()
	list := decodeAs[struct{ Data []APIKey }](e.t, e.must(200, "GET", "/admin/v1/api-keys?page_size=100", ""))
	out := map[string]APIKey{}
	for _, k := range list.Data {
		out[k.ID] = k
	}
	return out
}

// TestOrgAdminKeyEndsWithItsGrant is the attack: a person with an
// org_admin grant signs in with a second factor and makes an org_admin key
// for a year; an admin removes the grant. The very next request with the
// key is refused (after one read index, as the person's own token is),
// and the key is no longer listed. The same for an admin person's key.
func TestOrgAdminKeyEndsWithItsGrant(t *testing.T) {
	e := newMakerEnv(t)
	tests := []struct {
		name, token string
		grant       func() Grant
		body        string
	}{
		{"org_admin person", olgaToken, func() Grant { return e.olgaGrant }, e.orgAdminKeyBody("olga's sync")},
		{"admin person", adaToken, func() Grant { return e.adaGrant }, fmt.Sprintf(`{"name":"ada's job","role":"admin","expires_in":%d}`, aYear)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := e.keyAs(tt.token, tt.body)
			if got := e.rename(k.Key); got != 200 {
				t.Fatalf("the key while the grant stands: got %d, want 200", got)
			}
			e.ri.calls.Store(0)
			e.ri.then = func() {
				e.ri.then = nil
				e.applyNow(fsm.MustCommand(fsm.TypeDeleteAdminGrant, fsm.DeleteAdminGrant{ID: tt.grant().ID}))
			}
			w := e.do("PATCH", "/admin/v1/organizations/"+e.org.ID, `{"name":"Taken over"}`, bearerHdr(k.Key)...)
			checkEnvelope(t, w, 401, "UNAUTHORIZED")
			if n := e.ri.calls.Load(); n != 1 {
				t.Errorf("read index calls: got %d, want 1", n)
			}
			if got := e.do("POST", "/admin/v1/users", `{"email":"new-`+tt.token+`@example.com"}`, bearerHdr(k.Key)...).Code; got != 401 {
				t.Errorf("creating a person with the key: got %d, want 401", got)
			}
			if got := e.rename(tt.token); got != 403 {
				t.Errorf("the person's own token: got %d, want 403", got)
			}
			if _, ok := e.listedKeys()[k.ID]; ok {
				t.Errorf("GET /api-keys still lists %s", k.ID)
			}
		})
	}
}

// TestKeysEndWithTheirMaker: a key made by a key made by a person ends
// with the person's grant, with the person's erasure, and with the key
// that made it; keys of others stay.
func TestKeysEndWithTheirMaker(t *testing.T) {
	tests := []struct {
		name  string
		end   func(e *makerEnv, first APIKey) string // the request that ends the line
		ended func(first, second, third APIKey) []APIKey
	}{
		{"the person's grant removed", func(e *makerEnv, _ APIKey) string { return "DELETE /admin/v1/admins/" + e.olgaGrant.ID },
			func(a, b, c APIKey) []APIKey { return []APIKey{a, b, c} }},
		{"the person erased", func(e *makerEnv, _ APIKey) string { return "DELETE /admin/v1/users/" + e.olga.ID },
			func(a, b, c APIKey) []APIKey { return []APIKey{a, b, c} }},
		{"the first key deleted", func(e *makerEnv, first APIKey) string { return "DELETE /admin/v1/api-keys/" + first.ID },
			func(a, b, c APIKey) []APIKey { return []APIKey{a, b, c} }},
		{"the second key deleted", func(e *makerEnv, _ APIKey) string { return "" },
			func(a, b, c APIKey) []APIKey { return []APIKey{b, c} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newMakerEnv(t)
			first := e.keyAs(olgaToken, e.orgAdminKeyBody("first"))
			second := e.keyAs(first.Key, e.orgAdminKeyBody("second"))
			third := e.keyAs(second.Key, e.orgAdminKeyBody("third"))
			other := e.keyAs(adaToken, e.orgAdminKeyBody("ada's"))
			tokens := e.keyAs(e.token, `{"name":"the token's","role":"auditor","expires_in":3600}`)
			req := tt.end(e, first)
			if req == "" {
				req = "DELETE /admin/v1/api-keys/" + second.ID
			}
			method, path, _ := strings.Cut(req, " ")
			e.must(204, method, path, "")
			ended := tt.ended(first, second, third)
			listed := e.listedKeys()
			for _, k := range []APIKey{first, second, third, other, tokens} {
				gone := false
				for _, x := range ended {
					gone = gone || x.ID == k.ID
				}
				want := 200
				if gone {
					want = 401
				}
				if got := e.do("GET", "/admin/v1/organizations/"+e.org.ID, "", bearerHdr(k.Key)...).Code; got != want {
					t.Errorf("key %s: got %d, want %d", k.Name, got, want)
				}
				if _, ok := listed[k.ID]; ok == gone {
					t.Errorf("key %s listed: got %v, want %v", k.Name, ok, !gone)
				}
			}
		})
	}
}

// TestDemotedMakersKeyActsAtMostAsTheMakerNow: an admin person made an
// admin key and an org_admin key of O; their admin grant becomes
// org_admin of O (the new grant first, then the old one removed). The
// admin key is refused (no role the maker holds covers it; refused rather
// than narrowed, see SECURITY.md), the org_admin key of O goes on, as
// org_admin of O and no more.
func TestDemotedMakersKeyActsAtMostAsTheMakerNow(t *testing.T) {
	e := newMakerEnv(t)
	wide := e.keyAs(adaToken, fmt.Sprintf(`{"name":"wide","role":"admin","expires_in":%d}`, aYear))
	narrow := e.keyAs(adaToken, e.orgAdminKeyBody("narrow"))
	e.createMembership(e.ada.ID, e.org.ID)
	e.createGrant(`{"user_id":"` + e.ada.ID + `","role":"org_admin","organization_id":"` + e.org.ID + `"}`)
	if got := e.do("POST", "/admin/v1/organizations", `{"slug":"w","name":"W"}`, bearerHdr(wide.Key)...).Code; got != 201 {
		t.Fatalf("the admin key while ada is admin: got %d, want 201", got)
	}
	e.must(204, "DELETE", "/admin/v1/admins/"+e.adaGrant.ID, "")
	checkEnvelope(t, e.do("GET", "/admin/v1/organizations", "", bearerHdr(wide.Key)...), 401, "UNAUTHORIZED")
	if got := e.rename(narrow.Key); got != 200 {
		t.Errorf("the org_admin key of O, ada now org_admin of O: got %d, want 200", got)
	}
	if got := e.do("POST", "/admin/v1/organizations", `{"slug":"x","name":"X"}`, bearerHdr(narrow.Key)...).Code; got != 403 {
		t.Errorf("the org_admin key creating an organization: got %d, want 403", got)
	}
	if got := e.rename(adaToken); got != 200 {
		t.Errorf("ada's own token, org_admin of O: got %d, want 200", got)
	}
}

// TestListsShowWhoMadeEachKey: GET /api-keys and each create's answer
// name the maker as detail.credential names who acted; a body cannot
// choose it.
func TestListsShowWhoMadeEachKey(t *testing.T) {
	e := newMakerEnv(t)
	byToken := e.keyAs(e.token, `{"name":"by token","role":"admin","expires_in":3600}`)
	byPerson := e.keyAs(olgaToken, e.orgAdminKeyBody("by olga"))
	byKey := e.keyAs(byPerson.Key, e.orgAdminKeyBody("by olga's key"))
	want := map[string]string{
		byToken.ID:  `{"kind":"token"}`,
		byPerson.ID: `{"kind":"person","sub":"` + e.olga.ID + `"}`,
		byKey.ID:    `{"kind":"api_key","id":"` + byPerson.ID + `"}`,
	}
	for _, k := range []APIKey{byToken, byPerson, byKey} {
		if got, _ := json.Marshal(k.CreatedBy); string(got) != want[k.ID] {
			t.Errorf("the answer of %s: created_by got %s, want %s", k.Name, got, want[k.ID])
		}
	}
	listed := e.listedKeys()
	for id, w := range want {
		if got, _ := json.Marshal(listed[id].CreatedBy); string(got) != w {
			t.Errorf("GET /api-keys, %s: created_by got %s, want %s", listed[id].Name, got, w)
		}
	}
	// A body naming another maker is refused before anything is written.
	for _, field := range []string{`"created_by":{"kind":"token"}`, `"maker_kind":"","maker_id":""`} {
		body := `{"name":"forged","role":"org_admin","organization_id":"` + e.org.ID + `","expires_in":60,` + field + `}`
		if w := e.do("POST", "/admin/v1/api-keys", body, bearerHdr(olgaToken)...); w.Code != 400 {
			t.Errorf("a body with %s: got %d %s, want 400", field, w.Code, w.Body)
		}
	}
}

// TestKeyMadeByAKey: it expires no later than the key that made it, and
// a line of keys made by keys stops at fsm.MaxAPIKeyChain.
func TestKeyMadeByAKey(t *testing.T) {
	e := newMakerEnv(t)
	k := e.keyAs(e.token, `{"name":"hour","role":"admin","expires_in":3600}`)
	made := e.keyAs(k.Key, fmt.Sprintf(`{"name":"asks a year","role":"auditor","expires_in":%d}`, aYear))
	if !made.ExpiresAt.Equal(k.ExpiresAt) {
		t.Errorf("expires_at: got %s, want the maker's %s", made.ExpiresAt, k.ExpiresAt)
	}
	line := []APIKey{k}
	for len(line) < fsm.MaxAPIKeyChain {
		line = append(line, e.keyAs(line[len(line)-1].Key, `{"name":"deeper","role":"admin","expires_in":600}`))
	}
	w := e.do("POST", "/admin/v1/api-keys", `{"name":"too deep","role":"auditor","expires_in":60}`, bearerHdr(line[len(line)-1].Key)...)
	if env := checkEnvelope(t, w, 403, "FORBIDDEN"); !strings.Contains(env.Message, fmt.Sprint(fsm.MaxAPIKeyChain)) {
		t.Errorf("message: got %q, want the bound named", env.Message)
	}
	if got := e.do("GET", "/admin/v1/organizations", "", bearerHdr(line[len(line)-1].Key)...).Code; got != 200 {
		t.Errorf("the last key of the line: got %d, want 200", got)
	}
}

// TestMakerLapsedBetweenCheckAndWrite: a grant removed after the
// person's credential was checked and before the key's write is applied
// makes no key: 403.
func TestMakerLapsedBetweenCheckAndWrite(t *testing.T) {
	e := newMakerEnv(t)
	e.hook.before = func() {
		e.applyNow(fsm.MustCommand(fsm.TypeDeleteAdminGrant, fsm.DeleteAdminGrant{ID: e.olgaGrant.ID}))
	}
	w := e.do("POST", "/admin/v1/api-keys", e.orgAdminKeyBody("raced"), bearerHdr(olgaToken)...)
	if env := checkEnvelope(t, w, 403, "FORBIDDEN"); !strings.Contains(env.Message, "nothing was made") {
		t.Errorf("message: got %q", env.Message)
	}
	if n := len(e.listedKeys()); n != 0 {
		t.Errorf("keys: got %d, want none", n)
	}
}

// TestKeyWithAMakerWhileMixed: while the cluster runs the older state
// format (a rolling upgrade), a key made by a person or a key is refused,
// 409, saying what needs the upgrade; the break-glass token's keys, which
// record no maker, are made as before.
func TestKeyWithAMakerWhileMixed(t *testing.T) {
	people := &fakePeople{}
	e := newEnv(t, withPeople(people, "")) // a fresh state: the base format
	org := e.createOrg("o")
	olga := e.createUser(`{"email":"olga@example.com"}`)
	e.createMembership(olga.ID, org.ID)
	e.createGrant(`{"user_id":"` + olga.ID + `","role":"org_admin","organization_id":"` + org.ID + `"}`)
	people.set(olgaToken, PersonToken{Active: true, Sub: olga.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	k := e.createKey(`{"name":"token's","role":"admin","expires_in":3600}`)
	if k.CreatedBy.Kind != CredentialToken {
		t.Errorf("the token's key: created_by got %+v, want the token", k.CreatedBy)
	}
	for _, bearer := range []string{olgaToken, k.Key} {
		before := e.app.FSM.Applied()
		w := e.do("POST", "/admin/v1/api-keys", `{"name":"made","role":"org_admin","organization_id":"`+org.ID+`","expires_in":60}`, bearerHdr(bearer)...)
		env := checkEnvelope(t, w, 409, "CONFLICT")
		if !strings.Contains(env.Message, "records who made it") || !strings.Contains(env.Message, "state format 2") || !strings.Contains(env.Message, "Nothing was written") {
			t.Errorf("message: got %q, want what needs which format, and that nothing was written", env.Message)
		}
		if got := e.app.FSM.Applied(); got != before {
			t.Errorf("applied index: got %d, want %d", got, before)
		}
	}
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	made := decodeAs[APIKey](t, e.do("POST", "/admin/v1/api-keys", `{"name":"made","role":"auditor","expires_in":60}`, bearerHdr(k.Key)...))
	if made.CreatedBy != (Maker{Kind: CredentialAPIKey, ID: k.ID}) {
		t.Errorf("once upgraded: created_by got %+v, want the key %s", made.CreatedBy, k.ID)
	}
}
