package testcluster

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// Admin calls the admin API of node 0 with AdminToken: body as JSON, the
// answer decoded into out when out is not nil. It returns the status and
// fails t only when the request cannot be sent.
func (c *Cluster) Admin(t testing.TB, method, path string, body, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.URL(0)+"/admin/v1"+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// MustAdmin is Admin that fails t, with the answer, on any status from
// 300 up.
func (c *Cluster) MustAdmin(t testing.TB, method, path string, body, out any) {
	t.Helper()
	var raw map[string]any
	if st := c.Admin(t, method, path, body, &raw); st >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, st, raw)
	}
	if out != nil {
		b, _ := json.Marshal(raw)
		json.Unmarshal(b, out)
	}
}
