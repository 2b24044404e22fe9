package admin

import (
	"net/http"
	"testing"

	"github.com/oidcd/oidcd/internal/httpx"
)

// TestSharedClientsBrandingIsAnAdmins: a client's pages wear its owner's
// branding, so while O owns a client that serves other organizations (one
// serving every organization, or O and P), an org_admin of O may not
// change O's branding (403, nothing applied) — only an admin sets what
// people of other organizations see. Its other settings stay its own, and
// an organization whose clients serve it alone brands itself.
func TestSharedClientsBrandingIsAnAdmins(t *testing.T) {
	s := newScene(t)
	o, p := orgAdmin(s.o.ID), orgAdmin(s.p.ID)
	orgPath := "/admin/v1/organizations/"
	refused := func(t *testing.T, why string) {
		t.Helper()
		for _, body := range []string{`{"branding":{"display_name":"Globex Sign-in"}}`, `{"branding":{"logo":""}}`,
			`{"name":"Acme","branding":{"support_url":"https://evil.example/help"}}`} {
			before := s.app.FSM.Applied()
			w := s.as(o, "PATCH", orgPath+s.o.ID, body)
			checkEnvelope(t, w, http.StatusForbidden, httpx.CodeForbidden)
			if got := s.app.FSM.Applied(); got != before {
				t.Errorf("%s, %s: applied index moved from %d to %d", why, body, before, got)
			}
		}
	}
	refused(t, "owning a client of every organization and one serving O and P")
	if w := s.as(o, "PATCH", orgPath+s.o.ID, `{"name":"Acme Inc."}`); w.Code != http.StatusOK {
		t.Fatalf("org_admin renames O: got %d %s, want 200", w.Code, w.Body)
	}
	if w := s.as(p, "PATCH", orgPath+s.p.ID, `{"branding":{"display_name":"Globex"}}`); w.Code != http.StatusOK {
		t.Fatalf("org_admin of P, whose clients serve P alone, brands P: got %d %s, want 200", w.Code, w.Body)
	}
	if w := s.as(breakGlass, "PATCH", orgPath+s.o.ID, `{"branding":{"display_name":"Acme"}}`); w.Code != http.StatusOK {
		t.Fatalf("an admin brands O: got %d %s, want 200", w.Code, w.Body)
	}

	s.must(http.StatusNoContent, "DELETE", "/admin/v1/clients/"+s.all.ClientID, "")
	refused(t, "owning a client serving O and P")
	s.must(http.StatusOK, "PATCH", "/admin/v1/clients/"+s.shared.ClientID, `{"organizations":["`+s.o.ID+`"]}`)
	if w := s.as(o, "PATCH", orgPath+s.o.ID, `{"branding":{"display_name":"Acme Corp"}}`); w.Code != http.StatusOK {
		t.Fatalf("org_admin of O once its clients serve O alone: got %d %s, want 200", w.Code, w.Body)
	}
}
