package admin

import (
	"fmt"
	"testing"

	"github.com/oidcd/oidcd/internal/httpx"
)

// TestAdminMailToSubaddressesIsLimited: administrators' messages to one
// mailbox are counted together however its address is spelled, so an
// org_admin cannot multiply AdminMailLimit by inviting a stranger's
// subaddresses (ann+1@, ann+2@, ...), capitalized or with gmail's dots.
func TestAdminMailToSubaddressesIsLimited(t *testing.T) {
	e := newEnv(t, withMail)
	o := e.createOrg("acme")
	invite := func(addr string) int {
		t.Helper()
		return e.do("POST", "/admin/v1/invitations", `{"email":"`+addr+`","organization_id":"`+o.ID+`"}`).Code
	}
	for i := range AdminMailLimit {
		if code := invite(fmt.Sprintf("Ann+%d@Example.com", i)); code != 201 {
			t.Fatalf("invitation %d: %d", i+1, code)
		}
	}
	checkEnvelope(t, e.do("POST", "/admin/v1/invitations", `{"email":"ann+more@example.com","organization_id":"`+o.ID+`"}`), 429, httpx.CodeRateLimited)
	if pending, _ := e.state.PendingEmails(1000); len(pending) != AdminMailLimit {
		t.Errorf("messages to one mailbox: %d, want %d", len(pending), AdminMailLimit)
	}
	if code := invite("anne@example.com"); code != 201 {
		t.Errorf("another mailbox: %d", code)
	}

	for i := range AdminMailLimit {
		if code := invite(fmt.Sprintf("b.o.b+%d@gmail.com", i)); code != 201 {
			t.Fatalf("gmail invitation %d: %d", i+1, code)
		}
	}
	if code := invite("bo.b@googlemail.com"); code != 429 {
		t.Errorf("gmail's dots and googlemail.com: %d, want 429", code)
	}
}
