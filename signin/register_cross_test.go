package signin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// lockedBuffer is a log sink the handlers may write from several
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestRegistrationNamesNoOneToTheOrganization: the registration page of
// an organization, asked for an address that has an account (Ann's, who
// is no member of it), sends her the existing-account message and
// records an event that the organization's org_admin cannot tell from
// that of a new address whose link went out: the same fields, no
// subject, nothing that names her. (The org_admin opens its
// registration for any domain, so the event was a way to find anyone's
// id.) The site's operators find her in the node's log.
func TestRegistrationNamesNoOneToTheOrganization(t *testing.T) {
	logs := &lockedBuffer{}
	h := newMailHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	h.openRegistration("example.com")
	const fresh = "new.person@example.com"
	var pages []page
	for _, addr := range []string{hEmail, fresh} {
		b := h.browser()
		p := b.fill(onlyPostForm(t, b.registerPage(authzQuery(hPublic, false))), map[string]string{"email": addr})
		wantPage(t, "registration of "+addr, p, http.StatusOK, en(keyCheckEmail))
		pages = append(pages, p)
	}
	if a, b := pages[0], pages[1]; a.status != b.status || strings.ReplaceAll(a.body, hEmail, fresh) != b.body {
		t.Errorf("the pages differ:\n%s\nvs\n%s", a.body, b.body)
	}
	if ms := h.mailsTo(hEmail); len(ms) != 1 || ms[0].Kind != fsm.EmailRegistration || ms[0].msg.Link != "" {
		t.Fatalf("Ann's messages %+v, want the existing-account message", ms)
	}
	if ms := h.mailsTo(fresh); len(ms) != 1 || ms[0].msg.Link == "" {
		t.Fatalf("the new address's messages %+v, want a link", ms)
	}

	evs := h.events(fsm.EventRegistration)
	if len(evs) != 2 {
		t.Fatalf("%d registration events, want 2", len(evs))
	}
	// What an org_admin of the organization reads of each (GET
	// /admin/v1/audit answers the event as stored), less what differs
	// between any two events.
	readable := func(e fsm.Event) fsm.Event {
		e.Seq, e.Time, e.PrevHash, e.Hash = 0, time.Time{}, "", ""
		return e
	}
	exists, sent := readable(evs[0]), readable(evs[1])
	if exists.OrgID != hOrgA || exists.Subject != "" {
		t.Errorf("the event for an address with an account: organization %q, subject %q, want %q and none", exists.OrgID, exists.Subject, hOrgA)
	}
	if a, b := eventString(t, exists), eventString(t, sent); a != b {
		t.Errorf("the organization tells the two apart:\n%s\n%s", a, b)
	}
	if trail := h.auditTrail(); strings.Contains(trail, hUser) || strings.Contains(trail, hEmail) {
		t.Errorf("the trail names Ann: %s", trail)
	}
	// The site's operators can still see whom it was.
	if out := logs.String(); !strings.Contains(out, "user_id="+hUser) || !strings.Contains(out, "organization_id="+hOrgA) {
		t.Errorf("the log does not say whose address it was:\n%s", out)
	}
}

// eventString is e as JSON, for a comparison.
func eventString(t *testing.T, e fsm.Event) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
