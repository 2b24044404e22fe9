package fsm

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// TestClientAuthAgreesWithClient: the lean read returns exactly the
// authentication fields of the full one, and nothing else.
func TestClientAuthAgreesWithClient(t *testing.T) {
	f, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	clients := []Client{
		{ID: "conf", Name: "Conf <&>", Type: ClientConfidential, SecretHash: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
			OrganizationID: orgA, RedirectURIs: []string{"https://app.example/cb?x=1&y=\"2\""}, Scopes: []string{"openid", "email"},
			MultiOrganization: true, Organizations: []string{orgA, orgB}, AccessTokenTTL: 600, CreatedAt: t0, UpdatedAt: t0},
		{ID: "pub", Name: "Public", Type: ClientPublic, OrganizationID: orgB, RedirectURIs: []string{"http://127.0.0.1:1/cb"},
			Suspended: true, AccessTokenTTL: 60, CreatedAt: t0, UpdatedAt: t0},
		{ID: "ünïcode", Name: "Ünïcode", Type: ClientConfidential, SecretHash: "h", OrganizationID: orgA,
			RedirectURIs: []string{"https://x/cb"}, CreatedAt: t0, UpdatedAt: t0}, // a non-ASCII value: the encoding/json fallback
	}
	var index uint64
	apply := func(typ Type, v any) {
		t.Helper()
		index++
		if r := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(typ, v).Encode()}).(Result); r.Err != nil {
			t.Fatalf("%s: %v", typ, r.Err)
		}
	}
	apply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0})
	apply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "beta", Name: "Beta", CreatedAt: t0})
	for _, c := range clients {
		apply(TypeCreateClient, PutClient{Create: true, Client: c})
	}
	s := f.State()
	for _, c := range clients {
		t.Run(c.ID, func(t *testing.T) {
			full, err := s.Client(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.ClientAuth(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := Client{ID: full.ID, Type: full.Type, SecretHash: full.SecretHash, OrganizationID: full.OrganizationID, Suspended: full.Suspended}
			if got.ID != want.ID || got.Type != want.Type || got.SecretHash != want.SecretHash ||
				got.OrganizationID != want.OrganizationID || got.Suspended != want.Suspended ||
				got.Name != "" || got.RedirectURIs != nil || got.Organizations != nil || !got.CreatedAt.IsZero() {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	if _, err := s.ClientAuth("none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown client: got %v, want ErrNotFound", err)
	}

	// Read once more (from the access cache now), then a new secret and
	// a suspension, then a deletion: each shows at once.
	if got, _ := s.ClientAuth("conf"); got.SecretHash != clients[0].SecretHash {
		t.Fatalf("cached read: %+v", got)
	}
	c := clients[0]
	c.SecretHash, c.Suspended = "rotated", true
	apply(TypeUpdateClient, PutClient{Client: c})
	if got, err := s.ClientAuth("conf"); err != nil || got.SecretHash != "rotated" || !got.Suspended {
		t.Errorf("after a new secret and a suspension: %+v, %v", got, err)
	}
	apply(TypeDeleteClient, DeleteClient{ID: "conf"})
	if _, err := s.ClientAuth("conf"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after deletion: got %v, want ErrNotFound", err)
	}
}
