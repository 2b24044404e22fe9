package node_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/oidcd/oidcd/testcluster"
)

// BenchmarkImportUsers: POST /admin/v1/users/import with batches of 1,000
// people (a bcrypt hash and two memberships each) to the leader, one
// batch at a time, over HTTP: the JSON request, the checks, one replicated
// write per batch and the answer. people/s is reported; the state
// machine's own ceiling is fsm's BenchmarkApplyImportUsers.
func BenchmarkImportUsers(b *testing.B) {
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			c, w := benchCluster(b, size)
			const hash = "$2b$10$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS"
			leader := c.Leader()
			n := 0
			bodies := make([]map[string]any, b.N)
			for i := range bodies {
				users := make([]map[string]any, 1000)
				for j := range users {
					n++
					users[j] = map[string]any{"email": fmt.Sprintf("p%d@example.com", n), "password_hash": hash,
						"organizations": []string{w.orgA, w.orgB}}
				}
				bodies[i] = map[string]any{"users": users}
			}
			b.ResetTimer()
			for _, body := range bodies {
				var ans struct{ Created int }
				if resp := doOn(b, c, leader, "POST", "/admin/v1/users/import", testcluster.AdminToken, body, &ans); resp.StatusCode != http.StatusOK || ans.Created != 1000 {
					b.Fatalf("import: %d, %d created", resp.StatusCode, ans.Created)
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "people/s")
		})
	}
}
