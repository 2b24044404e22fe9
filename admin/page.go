package admin

import (
	"math"
	"net/http"
	"strconv"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Pagination bounds (those of the membership list, used by every admin list).
const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// Pagination is the pagination object (the Pagination schema of
// docs/openapi/admin.json).
type Pagination struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"page_size"`
	TotalItems  int  `json:"total_items"`
	TotalPages  int  `json:"total_pages"`
	HasNext     bool `json:"has_next"`
	HasPrevious bool `json:"has_previous"`
}

// List is the shape of every list answer.
type List[T any] struct {
	Data       []T        `json:"data"`
	Pagination Pagination `json:"pagination"`
}

// parsePage reads page and page_size from the query.
func parsePage(r *http.Request) (fsm.Page, problems) {
	var p problems
	q := r.URL.Query()
	read := func(name string, def, max int) int {
		if !q.Has(name) {
			return def
		}
		n, err := strconv.Atoi(q.Get(name))
		switch {
		case err != nil:
			p.add(name, codeInvalid, "must be an integer")
		case n < 1:
			p.add(name, codeOutOfRange, "must be at least 1")
		case n > max:
			p.add(name, codeOutOfRange, "must be at most %d", max)
		default:
			return n
		}
		return def
	}
	page := fsm.Page{Page: read("page", 1, math.MaxInt), PageSize: read("page_size", defaultPageSize, maxPageSize)}
	return page, p
}

// clamp keeps the offset (Page-1)*PageSize from overflowing: any page that
// far out is past the end anyway.
func clamp(p fsm.Page) fsm.Page {
	if limit := math.MaxInt/p.PageSize - 1; p.Page > limit {
		p.Page = limit
	}
	return p
}

// newList builds a list answer; data is never null.
func newList[T any](data []T, p fsm.Page, total int) List[T] {
	if data == nil {
		data = []T{}
	}
	pages := (total + p.PageSize - 1) / p.PageSize
	return List[T]{Data: data, Pagination: Pagination{
		Page:        p.Page,
		PageSize:    p.PageSize,
		TotalItems:  total,
		TotalPages:  pages,
		HasNext:     p.Page < pages,
		HasPrevious: p.Page > 1,
	}}
}

// mapSlice converts records to answers.
func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

// serveList answers a paginated list read from the state, each record
// converted by conv.
func serveList[R, O any](a *api, w http.ResponseWriter, r *http.Request,
	read func(fsm.Page) ([]R, int, error), conv func(R) O) {
	p, bad := parsePage(r)
	if len(bad) > 0 {
		writeInvalid(w, r, bad)
		return
	}
	recs, total, err := read(clamp(p))
	if err != nil {
		a.unavailable(w, r, "read state", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, newList(mapSlice(recs, conv), p, total))
}
