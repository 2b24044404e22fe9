package oidc

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// pickerPageSize is how many organizations one picker page lists.
const pickerPageSize = 10

// sortOrgs orders organizations for the picker: by name ignoring case,
// then id, a total order the keyset cursors rely on.
func sortOrgs(orgs []fsm.Org) {
	slices.SortFunc(orgs, compareOrgs)
}

func compareOrgs(a, b fsm.Org) int {
	return cmp.Or(strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), strings.Compare(a.ID, b.ID))
}

// toPicker hands the flow to the organization picker: the pending request
// goes into the oidcd_authz cookie and the browser to GET
// /authorize/organization.
func (f *flow) toPicker() {
	f.pend.Stage = stagePicker
	sealed, err := f.p.sealPending(f.pend)
	if err != nil {
		f.unavailable("seal picker: " + err.Error())
		return
	}
	f.p.setCookie(f.w, cookieAuthz, sealed, authzCookiePath, f.pend.Req.RequestedAt.Add(pendingTTL))
	f.redirect(pathPicker)
}

// pickerQuery is the validated query of GET /authorize/organization.
type pickerQuery struct {
	Q, After, Before string
}

// parsePickerQuery checks q (at most 64 bytes) and the after/before
// cursors (UUIDs, at most one of them). Other parameters are ignored.
func parsePickerQuery(raw string) (pickerQuery, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return pickerQuery{}, err
	}
	var pq pickerQuery
	for _, k := range []string{"q", "after", "before"} {
		if len(v[k]) > 1 {
			return pickerQuery{}, fmt.Errorf("parameter %q repeated", k)
		}
	}
	pq.Q, pq.After, pq.Before = v.Get("q"), v.Get("after"), v.Get("before")
	switch {
	case len(pq.Q) > maxPickerLen:
		return pickerQuery{}, fmt.Errorf("q has %d bytes, want at most %d", len(pq.Q), maxPickerLen)
	case pq.After != "" && pq.Before != "":
		return pickerQuery{}, fmt.Errorf("both after and before")
	case v.Has("after") && !isUUID(pq.After), v.Has("before") && !isUUID(pq.Before):
		return pickerQuery{}, fmt.Errorf("cursor is not a UUID")
	}
	pq.After, pq.Before = strings.ToLower(pq.After), strings.ToLower(pq.Before)
	return pq, nil
}

// pickerPage selects one page of sorted orgs: those matching q (a
// case-insensitive substring of name or slug), after or before the
// cursor organization. A cursor that is not in orgs is ignored (first
// page). It returns the page and the cursors of the pages before and
// after it ("" when there is none).
func pickerPage(orgs []fsm.Org, pq pickerQuery, size int) (page []fsm.Org, prev, next string) {
	needle := strings.ToLower(strings.TrimSpace(pq.Q))
	var match []fsm.Org
	for _, o := range orgs {
		if needle == "" || strings.Contains(strings.ToLower(o.Name), needle) || strings.Contains(strings.ToLower(o.Slug), needle) {
			match = append(match, o)
		}
	}
	start, end := 0, min(size, len(match))
	if i := indexOrg(orgs, pq.After); i >= 0 {
		start = firstAfter(match, orgs[i])
		end = min(start+size, len(match))
	} else if i := indexOrg(orgs, pq.Before); i >= 0 {
		end = firstAfter(match, orgs[i])
		if end > 0 && match[end-1].ID == orgs[i].ID {
			end-- // strictly before the cursor
		}
		start = max(0, end-size)
	}
	page = match[start:end]
	if start > 0 && len(page) > 0 {
		prev = page[0].ID
	}
	if end < len(match) && len(page) > 0 {
		next = page[len(page)-1].ID
	}
	return page, prev, next
}

// firstAfter is the index of the first of sorted orgs that sorts after o.
func firstAfter(sorted []fsm.Org, o fsm.Org) int {
	i, found := slices.BinarySearchFunc(sorted, o, compareOrgs)
	if found {
		i++
	}
	return i
}

// pickerURL is a same-origin link to another picker page: only q and one
// cursor, never anything from elsewhere.
func pickerURL(q, key, cursor string) string {
	v := url.Values{key: {cursor}}
	if q != "" {
		v.Set("q", q)
	}
	return pathPicker + "?" + v.Encode()
}

// handlePicker is GET /authorize/organization.
func (p *Provider) handlePicker(w http.ResponseWriter, r *http.Request) {
	f := p.newFlow(w, r)
	pd, err := p.openPending(p.cookieValue(r, cookieAuthz, authzCookiePath), f.now, stagePicker)
	switch {
	case errors.Is(err, errStepInvalid):
		f.page(http.StatusBadRequest, msgExpired, "authz cookie invalid, expired or of another stage")
		return
	case err != nil:
		f.unavailable("sealer: " + err.Error())
		return
	}
	f.pend = pd
	pq, err := parsePickerQuery(r.URL.RawQuery)
	if err != nil {
		f.page(http.StatusBadRequest, msgBadRequest, "picker query: "+err.Error())
		return
	}
	if !f.loadClient() || !f.loadSession() {
		return
	}
	cands, ok := f.pickerCandidates()
	if !ok {
		return
	}
	f.showPicker(http.StatusOK, cands, pq, "")
}

// handlePickerPost is POST /authorize/organization: the chosen
// organization.
func (p *Provider) handlePickerPost(w http.ResponseWriter, r *http.Request) {
	f := p.newFlow(w, r)
	form, ok := f.openForm(stagePicker)
	if !ok || !f.loadClient() || !f.loadSession() {
		return
	}
	cands, ok := f.pickerCandidates()
	if !ok {
		return
	}
	id, _ := authn.FormValue(form, "organization_id")
	if indexOrg(cands, strings.ToLower(id)) < 0 {
		f.showPicker(http.StatusBadRequest, cands, pickerQuery{}, msgPickOrg)
		return
	}
	f.pend.OrgID = strings.ToLower(id)
	f.proceed(false)
}

// pickerCandidates returns the organizations the picker offers, once the
// session that authenticated this request is still the browser's. If it is
// not, the pipeline runs afresh (sign-in, or a redirect). ok is false when
// it has answered.
func (f *flow) pickerCandidates() ([]fsm.Org, bool) {
	if !f.sameSession() {
		f.pend.SSOID, f.pend.OrgID = "", ""
		f.proceed(false)
		return nil, false
	}
	cands, err := f.p.orgCandidates(f.user.ID, f.client)
	if err != nil {
		f.unavailable("memberships: " + err.Error())
		return nil, false
	}
	if len(cands) == 0 {
		f.fail(errOrgDenied)
		return nil, false
	}
	return cands, true
}

// showPicker renders one page of the picker (stage picker), with the
// error of the catalog key errMsg ("" for none).
func (f *flow) showPicker(status int, cands []fsm.Org, pq pickerQuery, errMsg string) {
	c, ok := f.common(stagePicker, pathPicker)
	if !ok {
		return
	}
	page, prev, next := pickerPage(cands, pq, pickerPageSize)
	data := webui.PickerPage{Common: c, Query: pq.Q, Error: f.p.cfg.UI.Text(c.Lang, errMsg)}
	for _, o := range page {
		data.Orgs = append(data.Orgs, webui.PickerOrg{ID: o.ID, Name: o.Name, Slug: o.Slug})
	}
	if prev != "" {
		data.PrevURL = pickerURL(pq.Q, "before", prev)
	}
	if next != "" {
		data.NextURL = pickerURL(pq.Q, "after", next)
	}
	f.p.cfg.UI.OrganizationPicker(f.w, status, data)
}
