package console

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/oidcd/oidcd/fsm"
)

// auditPageSize is how many events one console page shows.
const auditPageSize = 50

type auditData struct {
	Query    fsm.AuditQuery
	Types    []string
	Events   []fsm.Event
	OlderURL string
}

// auditPage is GET /console/audit: the trail newest first, filtered by
// type, person, client and organization, a page of 50 at a time.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(w, r, "Audit trail", "audit")
	in := r.URL.Query()
	q := fsm.AuditQuery{Type: in.Get("type"), Subject: in.Get("subject"), ClientID: in.Get("client_id"), OrgID: in.Get("organization_id")}
	api := url.Values{"order": {"desc"}, "limit": {strconv.Itoa(auditPageSize)}}
	for k, val := range map[string]string{"type": q.Type, "subject": q.Subject, "client_id": q.ClientID, "organization_id": q.OrgID, "after": in.Get("before")} {
		if val != "" {
			api.Set(k, val)
		}
	}
	var page struct {
		Data      []fsm.Event `json:"data"`
		NextAfter uint64      `json:"next_after"`
	}
	status := 0
	if err := c.call(r, "GET", "/audit?"+api.Encode(), nil, &page); err != nil {
		status = c.fail(r, v, err)
	}
	d := auditData{Query: q, Events: page.Data,
		Types: []string{fsm.EventSignin, fsm.EventToken, fsm.EventRevocation, fsm.EventLogout, fsm.EventAdmin, fsm.EventKey, fsm.EventAccount,
			fsm.EventInvitation, fsm.EventVerifyEmail, fsm.EventPasswordReset, fsm.EventRegistration, fsm.EventIdentity}}
	if n := len(page.Data); n == auditPageSize && page.Data[n-1].Seq > 1 {
		older := url.Values{}
		for k, val := range map[string]string{"type": q.Type, "subject": q.Subject, "client_id": q.ClientID, "organization_id": q.OrgID} {
			if val != "" {
				older.Set(k, val)
			}
		}
		older.Set("before", strconv.FormatUint(page.Data[n-1].Seq, 10))
		d.OlderURL = Prefix + "audit?" + older.Encode()
	}
	v.Data = d
	c.render(w, status, "audit", v)
}
