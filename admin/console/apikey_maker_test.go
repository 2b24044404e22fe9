package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/fsm"
)

// apiAs calls the admin API beside the console with bearer and decodes a
// 2xx answer into out.
func (e *env) apiAs(bearer, method, path, body string, out any) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+admin.Prefix+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	r := e.do(req)
	if r.Status/100 != 2 {
		e.t.Fatalf("%s %s: got %d %s", method, path, r.Status, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(r.Body), out); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestAPIKeysPageShowsWhoMadeEachKey: the console's list of keys names
// each key's maker: a person by their address, a key by its name, the
// break-glass token.
func TestAPIKeysPageShowsWhoMadeEachKey(t *testing.T) {
	e := newEnv(t)
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	var ada struct{ ID string }
	e.apiAs(testToken, "POST", "/users", `{"email":"ada@example.com"}`, &ada)
	e.apiAs(testToken, "POST", "/admins", `{"user_id":"`+ada.ID+`","role":"admin"}`, nil)
	var byToken apiKey
	e.apiAs(testToken, "POST", "/api-keys", `{"name":"nightly backup","role":"admin","expires_in":3600}`, &byToken)
	e.apiAs(byToken.Key, "POST", "/api-keys", `{"name":"child job","role":"auditor","expires_in":600}`, nil)
	// A person's key, as the API makes it for ada's sign-in.
	now := time.Now().UTC()
	res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeCreateAPIKey, fsm.CreateAPIKey{Key: fsm.APIKey{
		ID: "00000000-0000-4000-8000-0000000000a9", Name: "ada's sync", Role: admin.RoleAuditor, Hash: "h", CreatedAt: now,
		ExpiresAt: now.Add(time.Hour), MakerKind: fsm.MakerPerson, MakerID: ada.ID}}))
	if err != nil || res.Err != nil {
		t.Fatalf("ada's key: %v %v", err, res.Err)
	}
	e.signIn()
	r := e.get(Prefix + "api-keys")
	wantStatus(t, "api keys", r, http.StatusOK)
	wantBody(t, "api keys", r, "Made by",
		"<td>child job</td><td>auditor</td><td></td><td>API key nightly backup</td>",
		"<td>nightly backup</td><td>admin</td><td></td><td>the break-glass token</td>",
		"<td>ada&#39;s sync</td><td>auditor</td><td></td><td>ada@example.com</td>")
}
