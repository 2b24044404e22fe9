package admin

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// adminEvent is the audit event of the admin-API write r makes: its
// action (method and route, e.g. "POST /clients"), target (the id in
// the path; for a create, fsm fills in the id of the record written) and
// credential (who acted: credentialDetail of the request's Credential,
// which GET /audit shows as the object detail.credential).
func adminEvent(r *http.Request) fsm.Audit {
	route := r.URL.Path
	if _, pattern, ok := strings.Cut(r.Pattern, " "); ok {
		route = pattern
	}
	detail := map[string]string{"action": r.Method + " " + strings.TrimPrefix(route, Prefix)}
	for _, name := range []string{"id", "key"} {
		if v := r.PathValue(name); v != "" {
			detail["target"] = v
			break
		}
	}
	if c, ok := CredentialFrom(r.Context()); ok {
		detail[fsm.DetailCredential] = credentialDetail(c)
	}
	ev := fsm.Audit{Type: fsm.EventAdmin, Actor: fsm.ActorAdmin, Detail: detail}
	touched(r, &ev) // the organization it touched (authz.go)
	return ev
}

// stamp returns cmd carrying r's admin event.
func (a *api) stamp(r *http.Request, cmd fsm.Command) fsm.Command {
	return fsm.StampIn(r.Context(), cmd, a.now(), adminEvent(r))
}

// withAdminEvent is r's context for a write another package proposes (a
// key rotation): that package's command carries r's admin event.
func withAdminEvent(r *http.Request) context.Context {
	b := fsm.AuditBaseFrom(r.Context())
	ev := adminEvent(r)
	b.Admin = &ev
	return fsm.WithAuditBase(r.Context(), b)
}

// recordAdmin commits r's admin event on its own, for an admin write that
// is not a state-machine command (a membership change of the raft
// cluster, a restore). Best effort: the change is made; a failure to
// record it is logged.
func (a *api) recordAdmin(r *http.Request) {
	cmd := fsm.StampIn(r.Context(), fsm.NewAuditEvent(fsm.Audit{}), a.now(), adminEvent(r))
	cmd.Flags |= fsm.FlagIgnorable
	if _, err := a.Applier.Apply(r.Context(), cmd); err != nil {
		a.Logger.Warn("admin: record the audit event", "action", r.Method+" "+r.URL.Path, "err", err)
	}
}

// auditPage is GET /audit.
type auditPage struct {
	Data      []fsm.Event `json:"data"`
	NextAfter uint64      `json:"next_after"`
}

// listAudit is GET /audit?after=&limit=&type=&subject=&client_id=&organization_id=
// (docs/operators/audit.md), and two more parameters: wait= (seconds, a long poll
// for tail --follow) and order=desc (newest first; after=N then lists
// the events before N, and next_after is the last, oldest, seq returned).
func (a *api) listAudit(w http.ResponseWriter, r *http.Request) {
	q, wait, details := parseAuditQuery(r.URL.Query())
	if len(details) > 0 {
		writeInvalid(w, r, details)
		return
	}
	if org := orgScope(r); org != "" {
		q.OrgID = org // the events that name the org_admin's organization (authz.go)
	}
	events, err := a.State.AuditEvents(q)
	if len(events) == 0 && err == nil && wait > 0 {
		// A long poll (tail --follow): answer as soon as an event after
		// the cursor is applied here, or empty at the end of the wait.
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		for len(events) == 0 && err == nil {
			if a.State.WaitApplied(ctx, a.State.Applied()+1) != nil {
				break
			}
			events, err = a.State.AuditEvents(q)
		}
	}
	if err != nil {
		a.unavailable(w, r, "read the audit trail", err)
		return
	}
	page := auditPage{Data: events, NextAfter: q.After}
	if page.Data == nil {
		page.Data = []fsm.Event{}
	}
	if n := len(events); n > 0 {
		page.NextAfter = events[n-1].Seq
	}
	httpx.WriteJSON(w, http.StatusOK, page)
}

// auditTypes are the event types a filter may name.
var auditTypes = map[string]bool{fsm.EventSignin: true, fsm.EventToken: true, fsm.EventRevocation: true,
	fsm.EventLogout: true, fsm.EventAdmin: true, fsm.EventKey: true, fsm.EventAccount: true,
	fsm.EventInvitation: true, fsm.EventPasswordReset: true, fsm.EventVerifyEmail: true, fsm.EventRegistration: true, fsm.EventIdentity: true}

// parseAuditQuery reads the query of GET /audit; every problem is a detail.
//
// wait (seconds, 0 to 60) makes an empty answer wait for the next event.
func parseAuditQuery(v map[string][]string) (fsm.AuditQuery, time.Duration, []httpx.Detail) {
	q := fsm.AuditQuery{Limit: 100}
	var wait time.Duration
	var details []httpx.Detail
	known := map[string]bool{"after": true, "limit": true, "type": true, "subject": true, "client_id": true, "organization_id": true, "wait": true, "order": true,
		staleParam: true} // read and checked before the handler (linearize.go)
	for name, vals := range v {
		switch {
		case !known[name]:
			details = append(details, httpx.Detail{Field: name, Message: "unknown parameter", Code: "unknown"})
		case len(vals) != 1:
			details = append(details, httpx.Detail{Field: name, Message: "must be given once", Code: "invalid"})
		}
	}
	get := func(name string) string {
		if vals := v[name]; len(vals) == 1 {
			return vals[0]
		}
		return ""
	}
	if s := get("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			details = append(details, httpx.Detail{Field: "after", Message: "must be an integer of 0 or more", Code: "invalid"})
		}
		q.After = n
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > fsm.MaxAuditPage {
			details = append(details, httpx.Detail{Field: "limit", Message: "must be an integer from 1 to 1000", Code: "invalid"})
		}
		q.Limit = n
	}
	if s := get("wait"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 60 {
			details = append(details, httpx.Detail{Field: "wait", Message: "must be a number of seconds from 0 to 60", Code: "invalid"})
		}
		wait = time.Duration(n) * time.Second
	}
	switch get("order") {
	case "", "asc":
	case "desc":
		// Newest first: after then bounds from above (the events before it).
		q.Newest = true
	default:
		details = append(details, httpx.Detail{Field: "order", Message: "must be asc or desc", Code: "invalid"})
	}
	q.Type, q.Subject, q.ClientID, q.OrgID = get("type"), get("subject"), get("client_id"), get("organization_id")
	if q.Type != "" && !auditTypes[q.Type] {
		details = append(details, httpx.Detail{Field: "type", Message: "must be one of signin, token, revocation, logout, admin, key, account, invitation, password_reset, verify_email, registration", Code: "invalid"})
	}
	for field, val := range map[string]string{"subject": q.Subject, "client_id": q.ClientID, "organization_id": q.OrgID} {
		if len(val) > 256 || strings.ContainsRune(val, 0) {
			details = append(details, httpx.Detail{Field: field, Message: "must be an id of at most 256 bytes", Code: "invalid"})
		}
	}
	return q, wait, details
}

// verifyAudit is GET /audit/verify.
func (a *api) verifyAudit(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	v, err := a.State.VerifyAudit()
	if err != nil {
		a.unavailable(w, r, "verify the audit trail", err)
		return
	}
	if !v.OK {
		a.Logger.Error("admin: the audit trail does not verify", "broken_at", *v.BrokenAt, "reason", v.Reason)
	}
	a.Logger.Debug("admin: audit verified", "count", v.Count, "took", time.Since(start))
	if a.OnVerify != nil {
		a.OnVerify(v.OK)
	}
	httpx.WriteJSON(w, http.StatusOK, v)
}
