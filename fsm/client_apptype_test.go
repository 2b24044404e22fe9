package fsm

import (
	"errors"
	"slices"
	"testing"
)

// TestClientApplicationTypeAndWebOrigins: a native application type and
// a client's web origins (none at all, set on purpose, or the default)
// are stored, read back and kept by a snapshot; an application type
// apply does not know is refused and stores nothing.
func TestClientApplicationTypeAndWebOrigins(t *testing.T) {
	h := newHarness(t)
	seed(h)
	clients := []Client{
		{ID: "cli", Name: "Desktop", Type: ClientPublic, OrganizationID: orgA, ApplicationType: ApplicationNative,
			RedirectURIs: []string{"http://127.0.0.1/callback", "com.example.app:/callback"}, UpdatedAt: t0},
		{ID: "spa", Name: "SPA", Type: ClientPublic, OrganizationID: orgA, RedirectURIs: []string{"https://spa.example/cb"},
			WebOrigins: []string{"https://spa.example", "https://other.example"}, WebOriginsSet: true, UpdatedAt: t0},
		{ID: "closed", Name: "Closed", Type: ClientPublic, OrganizationID: orgA, RedirectURIs: []string{"https://c.example/cb"},
			WebOriginsSet: true, UpdatedAt: t0},
		{ID: "default", Name: "Default", Type: ClientPublic, OrganizationID: orgA, RedirectURIs: []string{"https://d.example/cb"}, UpdatedAt: t0},
	}
	for _, c := range clients {
		h.mustApply(TypeCreateClient, PutClient{Create: true, Client: c})
	}
	if r := h.apply(TypeCreateClient, PutClient{Create: true, Client: Client{ID: "odd", OrganizationID: orgA, ApplicationType: "web"}}); !errors.Is(r.Err, ErrInvalid) {
		t.Errorf("application type web stored as such: got %v, want ErrInvalid (web is stored empty)", r.Err)
	}
	if _, err := h.f.State().Client("odd"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused create stored the client: %v", err)
	}
	check := func(name string, s *State) {
		t.Helper()
		for _, want := range clients {
			got, err := s.Client(want.ID)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, want.ID, err)
			}
			if got.ApplicationType != want.ApplicationType || got.WebOriginsSet != want.WebOriginsSet || !slices.Equal(got.WebOrigins, want.WebOrigins) {
				t.Errorf("%s: %s: got %q %v %q, want %q %v %q", name, want.ID, got.ApplicationType, got.WebOriginsSet, got.WebOrigins,
					want.ApplicationType, want.WebOriginsSet, want.WebOrigins)
			}
		}
	}
	check("applied", h.f.State())
	restored := newHarness(t)
	restoreFrom(t, h.f, restored.f)
	check("after a snapshot", restored.f.State())
}
