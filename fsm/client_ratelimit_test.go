package fsm

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

func TestValidRateLimit(t *testing.T) {
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{"", true},
		{"20/60s", true},
		{"600/1m", true},
		{"1/1h30m", true},
		{"10000/1h", true},
		{"off", false},
		{"20", false},
		{"20/", false},
		{"/60s", false},
		{"0/60s", false},
		{"-1/60s", false},
		{"+5/60s", false},
		{"2.5/60s", false},
		{"20/60", false},
		{"20/0s", false},
		{"20/-1s", false},
		{" 20/60s", false}, // the admin API trims; apply takes the stored form only
		{"20/60s ", false},
		{"20/ 60s", false},
	} {
		if got := validRateLimit(c.s); got != c.ok {
			t.Errorf("validRateLimit(%q): got %v, want %v", c.s, got, c.ok)
		}
	}
}

// TestClientRateLimitIsStored: a valid rate_limit is stored, read back by
// Client and ClientAuthAndLimit (and not by ClientAuth), changed and cleared by an update, and survives a
// snapshot; an invalid one is refused (ErrInvalid) and changes nothing,
// on a fresh FSM and on one rebuilt from a snapshot alike.
func TestClientRateLimitIsStored(t *testing.T) {
	run := func(t *testing.T, h *harness) {
		client := func(limit string) Client {
			return Client{ID: "busy", Name: "Busy", Type: ClientConfidential, SecretHash: "h", OrganizationID: orgA,
				RedirectURIs: []string{"https://busy/cb"}, RateLimit: limit, UpdatedAt: t0}
		}
		steps := []struct {
			name string
			typ  Type
			cmd  PutClient
			want error
			read string // the rate limit read afterwards
		}{
			{"create with one", TypeCreateClient, PutClient{Create: true, Client: client("20/60s")}, nil, "20/60s"},
			{"update to another", TypeUpdateClient, PutClient{Client: client("600/1m")}, nil, "600/1m"},
			{"update to a malformed one", TypeUpdateClient, PutClient{Client: client("600 per minute")}, ErrInvalid, "600/1m"},
			{"update to off", TypeUpdateClient, PutClient{Client: client("off")}, ErrInvalid, "600/1m"},
			{"update to none", TypeUpdateClient, PutClient{Client: client("")}, nil, ""},
		}
		for _, s := range steps {
			if r := h.apply(s.typ, s.cmd); !errors.Is(r.Err, s.want) {
				t.Fatalf("%s: got %v, want %v", s.name, r.Err, s.want)
			}
			full, err := h.f.State().Client("busy")
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			auth, err := h.f.State().ClientAuthAndLimit("busy")
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if full.RateLimit != s.read || auth.RateLimit != s.read || auth.SecretHash != "h" || auth.Type != ClientConfidential {
				t.Errorf("%s: Client %q, ClientAuthAndLimit %+v, want %q", s.name, full.RateLimit, auth, s.read)
			}
			if lean, _ := h.f.State().ClientAuth("busy"); lean.RateLimit != "" || lean.SecretHash != "h" {
				t.Errorf("%s: ClientAuth %+v, want the authentication fields only", s.name, lean)
			}
		}
		if r := h.apply(TypeCreateClient, PutClient{Create: true, Client: Client{ID: "bad", OrganizationID: orgA, RateLimit: "0/60s"}}); !errors.Is(r.Err, ErrInvalid) {
			t.Errorf("create with 0/60s: got %v, want ErrInvalid", r.Err)
		}
		if _, err := h.f.State().Client("bad"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a refused create stored the client: %v", err)
		}
		h.mustApply(TypeUpdateClient, PutClient{Client: client("5/10s")})
	}
	fresh := newHarness(t)
	seed(fresh)
	run(t, fresh)

	restored := newHarness(t)
	restoreFrom(t, fresh.f, restored.f)
	restored.index = fresh.index
	if c, err := restored.f.State().ClientAuthAndLimit("busy"); err != nil || c.RateLimit != "5/10s" {
		t.Fatalf("after a snapshot: got %q, %v, want 5/10s", c.RateLimit, err)
	}
	restored.mustApply(TypeDeleteClient, DeleteClient{ID: "busy"})
	run(t, restored)
}

// TestOlderClientRecordsHaveNoRateLimit: a client record and a PutClient
// command written before rate_limit existed read as "use the default".
func TestOlderClientRecordsHaveNoRateLimit(t *testing.T) {
	h := newHarness(t)
	seed(h)
	// The record as an older version stored it: fields 1 to 15.
	type olderClient struct {
		ID             string    `cbor:"1,keyasint"`
		Name           string    `cbor:"2,keyasint"`
		Type           string    `cbor:"3,keyasint"`
		SecretHash     string    `cbor:"4,keyasint,omitempty"`
		RedirectURIs   []string  `cbor:"5,keyasint"`
		Scopes         []string  `cbor:"6,keyasint"`
		OrganizationID string    `cbor:"7,keyasint"`
		Suspended      bool      `cbor:"13,keyasint"`
		CreatedAt      time.Time `cbor:"14,keyasint"`
		UpdatedAt      time.Time `cbor:"15,keyasint"`
	}
	old := olderClient{ID: "old", Name: "Old", Type: ClientConfidential, SecretHash: "h", RedirectURIs: []string{"https://old/cb"},
		Scopes: []string{"openid"}, OrganizationID: orgA, CreatedAt: t0, UpdatedAt: t0}
	if err := h.f.db.Update(func(tx *bolt.Tx) error { put(tx, bucketClients, old.ID, old); return nil }); err != nil {
		t.Fatal(err)
	}
	full, err := h.f.State().Client("old")
	if err != nil || full.RateLimit != "" || full.Name != "Old" || full.SecretHash != "h" {
		t.Fatalf("Client: got %+v, %v", full, err)
	}
	if auth, err := h.f.State().ClientAuthAndLimit("old"); err != nil || auth.RateLimit != "" || auth.SecretHash != "h" {
		t.Fatalf("ClientAuthAndLimit: got %+v, %v", auth, err)
	}
	// A command from an older proposer has no rate_limit member at all.
	payload := []byte(`{"client":{"client_id":"older","name":"Older","type":"public","redirect_uris":["https://o/cb"],` +
		`"scopes":["openid"],"organization_id":"` + orgA + `","multi_organization":false,"organizations":null,"access_token_ttl":600,` +
		`"skip_consent":false,"suspended":false,"created_at":"2026-11-22T10:00:00Z","updated_at":"2026-11-22T10:00:00Z"},"create":true}`)
	h.index++
	if r := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: Command{Type: TypeCreateClient, Payload: payload}.Encode()}).(Result); r.Err != nil {
		t.Fatalf("older command: %v", r.Err)
	}
	if c, err := h.f.State().Client("older"); err != nil || c.RateLimit != "" {
		t.Fatalf("client of an older command: got %+v, %v", c, err)
	}
}

// TestClientLimitViewMatchesClient: ClientAuthAndLimit's view of RateLimit reads
// Client's field (name, CBOR key and type), as TestViewsMatchTheirRecords
// checks of the other views.
func TestClientLimitViewMatchesClient(t *testing.T) {
	v, _ := reflect.TypeOf(clientLimitView{}).FieldByName("RateLimit")
	c, _ := reflect.TypeOf(Client{}).FieldByName("RateLimit")
	if jsonName(v) != jsonName(c) || cborKey(v) != cborKey(c) || v.Type != c.Type {
		t.Errorf("clientLimitView.RateLimit (%q, key %s) is not Client.RateLimit (%q, key %s)", jsonName(v), cborKey(v), jsonName(c), cborKey(c))
	}
	b, err := encodeRecord(Client{ID: "x", RateLimit: "20/60s"})
	if err != nil {
		t.Fatal(err)
	}
	var l clientLimitView
	if err := decodeRecord(b, &l); err != nil || l.RateLimit != "20/60s" {
		t.Errorf("view read %q, %v; want 20/60s", l.RateLimit, err)
	}
}
