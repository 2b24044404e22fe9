package oidc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

func TestMemberships(t *testing.T) {
	h := newHarness(t)
	const hMemC = "2c000000-0000-4000-8000-000000000003"
	bcApply(t, h, fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: hMemC, UserID: hUser, OrgID: hOrgC, Status: fsm.MembershipSuspended}})
	tok := bcTokens(t, h, hConfidential, hSecret).AccessToken
	bcApply(t, h, fsm.TypeDeleteOrg, fsm.DeleteOrg{ID: hOrgB, At: h.clock.Now()})

	alpha := `{"membership_id":"` + hMemA + `","org_id":"` + hOrgA + `","org_slug":"alpha","org_name":"Org alpha","status":"active","org_status":"active"}`
	beta := `{"membership_id":"` + hMemB + `","org_id":"` + hOrgB + `","org_slug":"beta","org_name":"Org beta","status":"active","org_status":"deleted"}`
	gamma := `{"membership_id":"` + hMemC + `","org_id":"` + hOrgC + `","org_slug":"gamma","org_name":"Org gamma","status":"suspended","org_status":"active"}`
	page := func(p, size, total, pages int, next, prev bool) string {
		b, _ := json.Marshal(membershipPagination{p, size, total, pages, next, prev})
		return string(b)
	}
	ok := []struct {
		name, query string
		data        []string
		pagination  string
	}{
		{"defaults", "", []string{alpha, beta, gamma}, page(1, 20, 3, 1, false, false)},
		{"page size 1, page 1", "?page_size=1", []string{alpha}, page(1, 1, 3, 3, true, false)},
		{"page size 1, page 2", "?page=2&page_size=1", []string{beta}, page(2, 1, 3, 3, true, true)},
		{"page size 1, page 3", "?page=3&page_size=1", []string{gamma}, page(3, 1, 3, 3, false, true)},
		{"page size 2, page 2", "?page=2&page_size=2", []string{gamma}, page(2, 2, 3, 2, false, true)},
		{"past the end", "?page=4&page_size=1", nil, page(4, 1, 3, 3, false, true)},
		{"page size 100", "?page_size=100", []string{alpha, beta, gamma}, page(1, 100, 3, 1, false, false)},
		{"largest page", "?page=9223372036854775807&page_size=100", nil, page(9223372036854775807, 100, 3, 1, false, true)},
		{"other parameters are ignored", "?sort=x", []string{alpha, beta, gamma}, page(1, 20, 3, 1, false, false)},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			rec := bcDo(t, h, bcReq{method: "GET", path: PathMemberships + c.query, bearer: tok})
			if rec.Code != http.StatusOK {
				t.Fatalf("status: got %d, want 200 (%s)", rec.Code, rec.Body)
			}
			want := `{"data":[` + strings.Join(c.data, ",") + `],"pagination":` + c.pagination + `}`
			if got := rec.Body.String(); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type: got %q, want %q", got, "application/json")
			}
			if rec.Header().Get("X-Correlation-ID") == "" {
				t.Errorf("no X-Correlation-ID")
			}
		})
	}

	long := strings.Repeat("c", 129)
	bad := []struct {
		name, query string
		header      string
		fields      string
	}{
		{"page 0", "?page=0", "", "page"},
		{"page -1", "?page=-1", "", "page"},
		{"page not a number", "?page=abc", "", "page"},
		{"page a fraction", "?page=1.5", "", "page"},
		{"page empty", "?page=", "", "page"},
		{"page too large for an integer", "?page=99999999999999999999", "", "page"},
		{"page repeated", "?page=1&page=2", "", "page"},
		{"page_size 0", "?page_size=0", "", "page_size"},
		{"page_size 101", "?page_size=101", "", "page_size"},
		{"page_size repeated", "?page_size=5&page_size=5", "", "page_size"},
		{"both", "?page=0&page_size=1000", "", "page,page_size"},
		{"malformed query", "?page=%zz", "", "query"},
		{"correlation id of 129 bytes", "", long, "X-Correlation-ID"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := bcReq{method: "GET", path: PathMemberships + c.query, bearer: tok}
			if c.header != "" {
				r.header = map[string]string{"X-Correlation-ID": c.header}
			}
			details := bcEnvelope(t, bcDo(t, h, r), http.StatusBadRequest, "VALIDATION_ERROR")
			var fields []string
			for _, d := range details {
				fields = append(fields, d["field"])
				if d["message"] == "" || d["code"] == "" || len(d) != 3 {
					t.Errorf("detail %v: want field, message and code", d)
				}
			}
			if got := strings.Join(fields, ","); got != c.fields {
				t.Errorf("fields: got %q, want %q", got, c.fields)
			}
		})
	}
	t.Run("correlation id of 128 bytes is echoed", func(t *testing.T) {
		id := strings.Repeat("c", 128)
		rec := bcDo(t, h, bcReq{method: "GET", path: PathMemberships, bearer: tok, header: map[string]string{"X-Correlation-ID": id}})
		if rec.Code != http.StatusOK || rec.Header().Get("X-Correlation-ID") != id {
			t.Errorf("got %d and %q, want 200 and the id", rec.Code, rec.Header().Get("X-Correlation-ID"))
		}
	})
	t.Run("the bearer is checked first", func(t *testing.T) {
		bcInvalidToken(t, bcDo(t, h, bcReq{method: "GET", path: PathMemberships + "?page=0"}), true)
	})
}
