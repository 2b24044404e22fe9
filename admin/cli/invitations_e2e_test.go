package cli_test

import (
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
)

// TestInvitationsAgainstAdminAPI: invitations, an address check and an
// organization's registration through the CLI and the real admin API,
// with mail on, then the refusals the server makes without it.
func TestInvitationsAgainstAdminAPI(t *testing.T) {
	c := newCLIConfig(t, nil, func(cfg *admin.Config) { cfg.Mail, cfg.Issuer = true, "https://id.example.test" })
	org := c.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme")
	user := c.field("id", "", "user", "create", "--email", "ann@example.com")

	out, _ := c.run(cli.ExitOK, "", "org", "update", org, "--registration", "on", "--email-domains", "Acme.Example,bücher.example.")
	contains(t, "org update", out, "REGISTRATION", "on (acme.example,xn--bcher-kva.example)")
	out, _ = c.run(cli.ExitOK, "", "org", "update", org, "--registration", "off", "--name", "Acme Corp")
	contains(t, "org update off", out, "Acme Corp", "off (acme.example,xn--bcher-kva.example)")
	_, errOut := c.run(cli.ExitServerError, "", "org", "update", org, "--registration", "on", "--email-domains=")
	contains(t, "registration on without domains", errOut, "VALIDATION_ERROR", "registration.email_domains")
	_, errOut = c.run(cli.ExitServerError, "", "org", "update", org, "--email-domains", "ann@acme.example")
	contains(t, "an address as a domain", errOut, "registration.email_domains[0]", "without @")

	inv := c.field("id", "", "invitation", "create", "--email", "bob@example.com", "--org", org, "--expires-in", "72h")
	stored, err := c.state.Invitation(inv)
	if err != nil || stored.ExpiresAt.Sub(stored.CreatedAt).Hours() != 72 {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	out, _ = c.run(cli.ExitOK, "", "invitations", "list", "--org", org, "--status", "pending")
	contains(t, "invitation list", out, inv, "bob@example.com", "pending", "1 item")
	out, _ = c.run(cli.ExitOK, "", "invitation", "get", inv)
	contains(t, "invitation get", out, inv, "bob@example.com")
	_, errOut = c.run(cli.ExitServerError, "", "invitation", "create", "--email", "Bob <bob@example.com>", "--org", org)
	contains(t, "display name", errOut, "VALIDATION_ERROR", "email")
	out, _ = c.run(cli.ExitOK, "", "invitation", "delete", inv)
	contains(t, "invitation delete", out, "withdrew invitation "+inv)
	if _, err := c.state.Link(stored.LinkHash); err == nil {
		t.Error("the link outlived the withdrawal")
	}
	_, errOut = c.run(cli.ExitServerError, "", "invitation", "delete", inv)
	contains(t, "delete again", errOut, "NOT_FOUND")

	out, _ = c.run(cli.ExitOK, "", "user", "verify-email", user)
	contains(t, "verify-email", out, "sent a link to ann@example.com; it works until")
	if p, _ := c.state.PendingEmails(10); len(p) != 2 || p[1].Kind != fsm.EmailVerify || p[0].Locale != "en" || p[1].Locale != "en" {
		t.Errorf("outbox %+v, want the invitation and the address check, in English", p)
	}
	// --locale: the messages are in the language named.
	c.run(cli.ExitOK, "", "user", "verify-email", user, "--locale", "ja")
	c.field("id", "", "invitation", "create", "--email", "carl@example.com", "--org", org, "--locale", "de")
	if p, _ := c.state.PendingEmails(10); len(p) != 4 || p[2].Kind != fsm.EmailVerify || p[2].Locale != "ja" || p[3].Kind != fsm.EmailInvitation || p[3].Locale != "de" {
		t.Errorf("outbox %+v, want an address check in Japanese and an invitation in German", p)
	}

	// Without mail: a clear refusal, and nothing sent.
	off := newCLI(t)
	org = off.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme")
	_, errOut = off.run(cli.ExitServerError, "", "invitation", "create", "--email", "bob@example.com", "--org", org)
	if !strings.Contains(errOut, "CONFLICT") || !strings.Contains(errOut, "sends no mail") {
		t.Errorf("without mail: %q", errOut)
	}
}
