package oidc

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// PathMemberships lists the memberships of a token's subject (GET, with a
// bearer access token).
const PathMemberships = "/api/v1/me/memberships"

// Pagination of the membership list: page_size defaults to 20, at most 100.
const (
	membershipsPageSize    = 20
	membershipsMaxPageSize = 100
)

// membershipItem is one entry of the membership list (the Memberships
// schema of docs/openapi/oidc.json).
type membershipItem struct {
	MembershipID string `json:"membership_id"`
	OrgID        string `json:"org_id"`
	OrgSlug      string `json:"org_slug"`
	OrgName      string `json:"org_name"`
	Status       string `json:"status"`
	OrgStatus    string `json:"org_status"`
}

// membershipPagination is the pagination object of the membership list.
type membershipPagination struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"page_size"`
	TotalItems  int  `json:"total_items"`
	TotalPages  int  `json:"total_pages"`
	HasNext     bool `json:"has_next"`
	HasPrevious bool `json:"has_previous"`
}

// membershipList is MeMembershipsList; Data is never null.
type membershipList struct {
	Data       []membershipItem     `json:"data"`
	Pagination membershipPagination `json:"pagination"`
}

// handleMemberships is GET /api/v1/me/memberships: the
// memberships of the token's subject, every status, including those of
// deleted organizations. They are ordered by organization name, then
// membership id, so pages are stable and read naturally. The bearer is
// checked first (401 before 400); then page, page_size and the
// X-Correlation-ID header are validated.
func (p *Provider) handleMemberships(w http.ResponseWriter, r *http.Request) {
	tok, _, ok := p.bearer(w, r, bearerEnvelope, false)
	if !ok {
		return
	}
	page, size, bad := membershipsQuery(r)
	if len(bad) > 0 {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeValidation, "invalid request", bad...)
		return
	}
	all, err := p.cfg.State.MembershipsOfUser(tok.sub)
	if err != nil {
		p.logFault(r.Context(), "read memberships", err)
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "internal error")
		return
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Org.Name != all[j].Org.Name {
			return all[i].Org.Name < all[j].Org.Name
		}
		return all[i].ID < all[j].ID
	})
	total := len(all)
	out := membershipList{Data: []membershipItem{}, Pagination: membershipPagination{
		Page: page, PageSize: size, TotalItems: total, TotalPages: (total + size - 1) / size,
		HasPrevious: page > 1,
	}}
	out.Pagination.HasNext = page < out.Pagination.TotalPages
	if from := page - 1; from < (total+size-1)/size { // compare pages, not offsets: no overflow
		end := min(from*size+size, total)
		for _, m := range all[from*size : end] {
			out.Data = append(out.Data, membershipItem{
				MembershipID: m.ID, OrgID: m.OrgID, OrgSlug: m.Org.Slug, OrgName: m.Org.Name,
				Status: m.Status, OrgStatus: orgStatus(m.Org),
			})
		}
	}
	writeNoStoreJSON(w, out)
}

// orgStatus is an organization's status; a record that is gone counts as
// deleted.
func orgStatus(o fsm.Org) string {
	if o.Status == "" {
		return fsm.OrgDeleted
	}
	return o.Status
}

// membershipsQuery validates page, page_size and X-Correlation-ID,
// returning every problem at once.
func membershipsQuery(r *http.Request) (page, size int, bad []httpx.Detail) {
	if len(r.Header.Get(httpx.HeaderCorrelationID)) > httpx.MaxCorrelationID {
		bad = append(bad, httpx.Detail{Field: httpx.HeaderCorrelationID, Message: "must be at most 128 characters", Code: "too_long"})
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, 0, append(bad, httpx.Detail{Field: "query", Message: "malformed query string", Code: "invalid"})
	}
	read := func(name string, def, max int) int {
		v, ok := q[name]
		if !ok {
			return def
		}
		if len(v) > 1 {
			bad = append(bad, httpx.Detail{Field: name, Message: "must be given once", Code: "invalid"})
			return def
		}
		n, err := strconv.Atoi(v[0])
		switch {
		case err != nil:
			bad = append(bad, httpx.Detail{Field: name, Message: "must be an integer", Code: "invalid"})
		case n < 1:
			bad = append(bad, httpx.Detail{Field: name, Message: "must be at least 1", Code: "out_of_range"})
		case n > max:
			bad = append(bad, httpx.Detail{Field: name, Message: "must be at most " + strconv.Itoa(max), Code: "out_of_range"})
		default:
			return n
		}
		return def
	}
	page = read("page", 1, int(^uint(0)>>1))
	size = read("page_size", membershipsPageSize, membershipsMaxPageSize)
	return page, size, bad
}
