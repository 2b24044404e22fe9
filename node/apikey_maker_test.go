package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/testcluster"
)

// TestAPIKeysEndWithTheirMakerAcrossTheCluster is issue 42's second
// defect on three nodes: a person with an org_admin grant signs in with a
// second factor (node 1), makes an org_admin key for a year, and that
// key makes another (node 2). An admin removes the grant through node 0:
// on every node the very next request with either key is refused, and
// no node lists them. Erasing an admin person through node 1 ends their
// key the same way on every node.
func TestAPIKeysEndWithTheirMakerAcrossTheCluster(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	c.WaitLeader()
	call := func(i int, bearer, method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, c.URL(i)+"/admin/v1"+path, rd)
		req.Header.Set("Authorization", "Bearer "+bearer)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s on node %d: %v", method, path, i, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	must := func(i int, bearer, method, path string, body any, want int, out any) {
		t.Helper()
		got, raw := call(i, bearer, method, path, body)
		if got != want {
			t.Fatalf("%s %s on node %d: got %d %s, want %d", method, path, i, got, raw, want)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A cluster of one build raises its state format once every member
	// announces it; a key with a maker needs it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			StateFormat int  `json:"state_format"`
			Mixed       bool `json:"mixed"`
		}
		must(0, testcluster.AdminToken, "GET", "/cluster", nil, http.StatusOK, &st)
		if st.StateFormat >= 2 && !st.Mixed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state format stayed %d", st.StateFormat)
		}
		time.Sleep(100 * time.Millisecond)
	}
	admin := testcluster.AdminToken
	var org struct{ ID string }
	must(0, admin, "POST", "/organizations", map[string]any{"slug": "acme", "name": "Acme"}, http.StatusCreated, &org)
	person := func(email string) (id, totp string) {
		var u struct{ ID string }
		must(0, admin, "POST", "/users", map[string]any{"email": email, "password": "a long and proper passphrase"}, http.StatusCreated, &u)
		var f struct{ Secret string }
		must(0, admin, "POST", "/users/"+u.ID+"/totp", nil, http.StatusCreated, &f)
		return u.ID, f.Secret
	}
	olga, olgaTOTP := person("olga@example.com")
	must(0, admin, "POST", "/memberships", map[string]any{"user_id": olga, "org_id": org.ID}, http.StatusCreated, nil)
	var grant struct{ ID string }
	must(0, admin, "POST", "/admins", map[string]any{"user_id": olga, "role": "org_admin", "organization_id": org.ID}, http.StatusCreated, &grant)
	ops, opsTOTP := person("ops@example.com")
	must(0, admin, "POST", "/admins", map[string]any{"user_id": ops, "role": "admin"}, http.StatusCreated, nil)

	olgaToken := signInAsAdministrator(t, c, 1, "olga@example.com", "a long and proper passphrase", olgaTOTP)
	keyBody := map[string]any{"name": "sync", "role": "org_admin", "organization_id": org.ID, "expires_in": 31536000}
	type key struct {
		ID, Key   string
		CreatedBy struct{ Kind, Sub, ID string } `json:"created_by"`
	}
	var first, second key
	must(1, olgaToken, "POST", "/api-keys", keyBody, http.StatusCreated, &first)
	must(2, first.Key, "POST", "/api-keys", keyBody, http.StatusCreated, &second)
	if first.CreatedBy.Kind != "person" || first.CreatedBy.Sub != olga || second.CreatedBy.Kind != "api_key" || second.CreatedBy.ID != first.ID {
		t.Errorf("makers: got %+v and %+v, want olga and the first key", first.CreatedBy, second.CreatedBy)
	}
	for i, k := range []key{first, second} {
		must(2-i, k.Key, "PATCH", "/organizations/"+org.ID, map[string]any{"name": fmt.Sprintf("Acme %d", i)}, http.StatusOK, nil)
	}

	must(0, admin, "DELETE", "/admins/"+grant.ID, nil, http.StatusNoContent, nil)
	for i := range 3 {
		for _, k := range []key{first, second} {
			if got, raw := call(i, k.Key, "PATCH", "/organizations/"+org.ID, map[string]any{"name": "Taken"}); got != http.StatusUnauthorized {
				t.Errorf("key %s on node %d right after the grant went through node 0: got %d %s, want 401", k.ID, i, got, raw)
			}
		}
		if got, _ := call(i, olgaToken, "GET", "/organizations/"+org.ID, nil); got != http.StatusForbidden {
			t.Errorf("olga's token on node %d: got %d, want 403", i, got)
		}
		_, list := call(i, admin, "GET", "/api-keys?stale=true&page_size=100", nil)
		if strings.Contains(string(list), first.ID) || strings.Contains(string(list), second.ID) {
			t.Errorf("node %d still lists the keys: %s", i, list)
		}
	}

	opsToken := signInAsAdministrator(t, c, 2, "ops@example.com", "a long and proper passphrase", opsTOTP)
	var opsKey key
	must(2, opsToken, "POST", "/api-keys", map[string]any{"name": "backup", "role": "admin", "expires_in": 31536000}, http.StatusCreated, &opsKey)
	must(0, opsKey.Key, "GET", "/organizations", nil, http.StatusOK, nil)
	must(1, admin, "DELETE", "/users/"+ops, nil, http.StatusNoContent, nil)
	for i := range 3 {
		if got, _ := call(i, opsKey.Key, "GET", "/organizations", nil); got != http.StatusUnauthorized {
			t.Errorf("the erased person's key on node %d: got %d, want 401", i, got)
		}
	}
}
