package docs_test

import (
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// identityProviderCalls makes every call of the admin API's identity
// providers and people's links (docs/operators/federation.md) through a,
// for TestOpenAPIDocumentsMatchTheNode to check against the document:
// a provider of the organization orgID made, listed, read, changed and
// deleted, the links of the person userID listed and one unlinked that
// is not theirs, and the refusals the document names.
func identityProviderCalls(t *testing.T, a api, orgID, userID string) {
	t.Helper()
	// The leader raises the state format a moment after it starts: every
	// write of a provider needs it.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st := a.call("GET", "/cluster", nil, 200); st["state_format"] == float64(fsm.CurrentFormat) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the state format was not raised within 15 s")
		}
	}
	const none = "00000000-0000-4000-8000-000000000000"
	ip := a.call("POST", "/identity-providers", map[string]any{"slug": "staff", "display_name": "Staff SSO",
		"issuer": "https://login.example.com/realms/staff", "client_id": "oidcd", "client_secret": "upstream-secret",
		"scopes": []string{"openid", "email", "profile", "groups"}, "organization_id": orgID, "email_domains": []string{"staff.example.com"},
		"provisioning": "create_or_link", "memberships": map[string]any{"groups_claim": "groups", "group_organizations": map[string]string{"staff": orgID}},
		"trust_mfa": true, "backchannel_logout": true, "end_upstream_session": true, "enabled": true}, 201)
	id := ip["id"].(string)
	a.call("POST", "/identity-providers", map[string]any{"slug": "Not A Slug", "display_name": "X", "issuer": "http://login.example.com",
		"client_id": "c", "client_secret": "s"}, 400)
	a.call("POST", "/identity-providers", map[string]any{"slug": "nowhere", "display_name": "X", "issuer": "https://login.example.com",
		"client_id": "c", "client_secret": "s", "organization_id": none}, 422)
	a.call("POST", "/identity-providers", map[string]any{"slug": "staff", "display_name": "X", "issuer": "https://login.example.com",
		"client_id": "c", "client_secret": "s"}, 409)
	a.call("GET", "/identity-providers", nil, 200)
	a.call("GET", "/identity-providers/"+id, nil, 200)
	a.call("GET", "/identity-providers/"+none, nil, 404)
	a.call("PATCH", "/identity-providers/"+id, map[string]any{"display_name": "Staff", "client_secret": "rotated", "organization_id": nil,
		"email_domains": nil, "memberships": map[string]any{}}, 200)
	a.call("PATCH", "/identity-providers/"+id, map[string]any{"scopes": []string{"email"}}, 400)
	a.call("GET", "/users/"+userID+"/identities", nil, 200)
	a.call("DELETE", "/users/"+userID+"/identities/"+none, nil, 404)
	a.call("DELETE", "/identity-providers/"+id, nil, 204)
	a.call("DELETE", "/identity-providers/"+id, nil, 404)
}
