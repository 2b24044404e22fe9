package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

// newFederatedCLI is newCLI over a state of the current format (a
// cluster of one build a moment after it starts: identity providers need
// it), on a node whose issuer is https://id.example.
func newFederatedCLI(t *testing.T) *cliHarness {
	t.Helper()
	return newCLIConfig(t, nil, func(cfg *admin.Config) {
		cfg.Issuer = "https://id.example"
		if err := cfg.Applier.(*fsmtest.Applier).SetFormat(fsm.CurrentFormat); err != nil {
			t.Fatal(err)
		}
	})
}

// TestIdPCommands: the idp verbs build the requests the admin API takes,
// every field from its flag: the secret from a file or standard input
// (never shown back), --group-org GROUP=ORG_ID, the memberships whole;
// create and show print the addresses to register at the upstream,
// labelled; update keeps what it is not given.
func TestIdPCommands(t *testing.T) {
	c := newFederatedCLI(t)
	org := c.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme")
	secret := writeFile(t, "secret", "upstream-s3cret\n")
	out, errOut := c.run(cli.ExitOK, "", "idp", "create", "--slug", "staff", "--display-name", "Staff account",
		"--issuer", "https://sso.example.com/realms/staff", "--client-id", "oidcd", "--client-secret-file", secret,
		"--scope", "openid,email", "--scope", "groups", "--org", org, "--email-domain", "acme.example", "--provisioning", "create_or_link",
		"--membership-org", org, "--groups-claim", "groups", "--group-org", "cn=staff,ou=groups="+org, "--trust-mfa",
		"--backchannel-logout=false", "--end-upstream-session")
	contains(t, "idp create", out, "slug                  staff", "client_secret_set     true", "provisioning          create_or_link",
		"openid", "groups", `"cn=staff,ou=groups":"`+org+`"`,
		"register at the upstream, for its client oidcd:\n",
		"  redirect URI              https://id.example/federation/staff/callback\n",
		"  back-channel logout URI   https://id.example/federation/staff/backchannel-logout (only needed with --backchannel-logout, the default)\n",
		"  post-logout redirect URI  https://id.example/federation/staff/logged-out\n")
	if strings.Contains(out+errOut, "upstream-s3cret") {
		t.Fatalf("the secret is shown: %s %s", out, errOut)
	}
	var ip map[string]any
	out, _ = c.run(cli.ExitOK, "", "idp", "list", "--json")
	var list struct{ Data []map[string]any }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("idp list --json: %v %s", err, out)
	}
	ip = list.Data[0]
	id := ip["id"].(string)
	for k, want := range map[string]any{"display_name": "Staff account", "issuer": "https://sso.example.com/realms/staff", "client_id": "oidcd",
		"organization_id": org, "trust_mfa": true, "backchannel_logout": false, "end_upstream_session": true, "enabled": true} {
		if ip[k] != want {
			t.Errorf("%s: got %v, want %v", k, ip[k], want)
		}
	}
	if b, _ := json.Marshal(ip["scopes"]); string(b) != `["openid","email","groups"]` {
		t.Errorf("scopes: %s", b)
	}
	if b, _ := json.Marshal(ip["email_domains"]); string(b) != `["acme.example"]` {
		t.Errorf("email_domains: %s", b)
	}
	if b, _ := json.Marshal(ip["memberships"]); string(b) != `{"group_organizations":{"cn=staff,ou=groups":"`+org+`"},"groups_claim":"groups","organization_id":"`+org+`"}` {
		t.Errorf("memberships: %s", b)
	}
	out, _ = c.run(cli.ExitOK, "", "idp", "list")
	contains(t, "idp list", out, "SLUG", "staff", "Staff account", "https://sso.example.com/realms/staff", "create_or_link")

	// Update: only what is given; the secret is kept; the secret from
	// standard input.
	out, _ = c.run(cli.ExitOK, "", "idp", "update", id, "--enabled=false", "--backchannel-logout", "--json")
	contains(t, "idp update", out, `"enabled": false`, `"backchannel_logout": true`, `"trust_mfa": true`, `"client_secret_set": true`, `"slug": "staff"`)
	c.run(cli.ExitOK, "rotated\n", "idp", "update", id, "--client-secret-file", "-")
	out, _ = c.run(cli.ExitOK, "", "idp", "update", id, "--email-domain=", "--membership-org", org, "--org=", "--json")
	contains(t, "idp update lists", out, `"email_domains": []`, `"memberships": {`+"\n"+`    "organization_id": "`+org+`"`+"\n  }")
	if strings.Contains(out, "organization_id\": \""+org+"\",\n  \"provisioning") {
		t.Errorf("--org= kept the organization: %s", out)
	}
	out, _ = c.run(cli.ExitOK, "", "idp", "show", id)
	contains(t, "idp show", out, "enabled               false", "register at the upstream", "https://id.example/federation/staff/callback",
		"https://id.example/federation/staff/backchannel-logout\n", "https://id.example/federation/staff/logged-out\n")
	if strings.Contains(out, "only needed") {
		t.Errorf("idp show marks an address unneeded that the provider uses: %s", out)
	}
	_, errOut = c.run(cli.ExitServerError, "", "idp", "update", id, "--issuer", "http://sso.example.com")
	contains(t, "plain http refused", errOut, "error: VALIDATION_ERROR: ", "issuer: must use https")

	// The links of a person.
	user := c.field("id", "", "user", "create", "--email", "ann@example.com")
	out, _ = c.run(cli.ExitOK, "", "user", "identities", user)
	contains(t, "user identities", out, "no identities")
	_, errOut = c.run(cli.ExitServerError, "", "user", "unlink", user, "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b")
	contains(t, "unlink of nothing", errOut, "error: NOT_FOUND: ")

	out, _ = c.run(cli.ExitOK, "", "idp", "delete", id)
	contains(t, "idp delete", out, "deleted identity provider "+id)
	out, _ = c.run(cli.ExitOK, "", "idp", "list")
	contains(t, "after delete", out, "no identity providers")
}

// TestIdPUsage: what the CLI refuses before anything is sent.
func TestIdPUsage(t *testing.T) {
	c := newFederatedCLI(t)
	base := []string{"idp", "create", "--slug", "s", "--display-name", "S", "--issuer", "https://sso.example.com", "--client-id", "c"}
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"no secret", "", base, "--client-secret-file is required"},
		{"both secrets", "", append(base, "--client-secret", "x", "--client-secret-file", "-"), "not both"},
		{"empty standard input", "", append(base, "--client-secret-file", "-"), "standard input is empty"},
		{"no such file", "", append(base, "--client-secret-file", "/nonexistent/secret"), "--client-secret-file"},
		{"no slug", "", []string{"idp", "create", "--display-name", "S"}, "--slug is required"},
		{"bad provisioning", "x", append(base, "--client-secret-file", "-", "--provisioning", "maybe"), "--provisioning must be one of"},
		{"bad group-org", "x", append(base, "--client-secret-file", "-", "--group-org", "staff"), "GROUP=ORG_ID"},
		{"nothing to update", "", []string{"idp", "update", "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b"}, "nothing to update"},
		{"unlink needs both", "", []string{"user", "unlink", "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b"}, "IDENTITY_ID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut := c.run(cli.ExitUsage, tt.stdin, tt.args...)
			contains(t, tt.name, errOut, tt.want)
		})
	}
	if ips, _ := c.state.IdentityProviders(); len(ips) != 0 {
		t.Fatalf("a provider was made: %+v", ips)
	}
}
