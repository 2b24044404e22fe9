package cli_test

import (
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin/cli"
)

// TestGrantsByAddress: `admins create --user` takes the person's address,
// as the console's form does (or their user ID, as before), and `admins
// list` shows each person's address beside their ID. An address no person
// has is said so, and nothing is granted; a --user that is neither is a
// usage error, sent nowhere.
func TestGrantsByAddress(t *testing.T) {
	c := newCLI(t)
	demo := c.field("id", "", "user", "create", "--email", "demo@example.com")
	ann := c.field("id", "", "user", "create", "--email", "ann@example.com")

	out, _ := c.run(cli.ExitOK, "", "admins", "create", "--user", "demo@example.com", "--role", "admin")
	contains(t, "admins create --user ADDRESS", out, "EMAIL", demo, "demo@example.com", "admin")
	out, _ = c.run(cli.ExitOK, "", "admins", "create", "--user", ann, "--role", "auditor")
	contains(t, "admins create --user UUID", out, ann, "ann@example.com", "auditor")
	out, _ = c.run(cli.ExitOK, "", "admins", "create", "--user", "ANN@example.com", "--role", "admin", "--json")
	contains(t, "admins create --json", out, `"user_id": "`+ann+`"`)

	out, _ = c.run(cli.ExitOK, "", "admins", "list")
	lines := strings.Split(out, "\n")
	if head := strings.Fields(lines[0]); len(head) < 3 || head[1] != "USER" || head[2] != "EMAIL" {
		t.Errorf("admins list: got the head %q, want EMAIL beside USER", lines[0])
	}
	for _, want := range [][2]string{{demo, "demo@example.com"}, {ann, "ann@example.com"}} {
		found := false
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 2 && f[1] == want[0] && f[2] == want[1] {
				found = true
			}
		}
		if !found {
			t.Errorf("admins list: no row with %s beside %s:\n%s", want[1], want[0], out)
		}
	}
	contains(t, "admins list", out, "page 1/1, 3 items")

	_, errOut := c.run(cli.ExitServerError, "", "admins", "create", "--user", "nobody@example.com", "--role", "admin")
	contains(t, "admins create of an unknown address", errOut, "error: no person has the address nobody@example.com\n", "oidcd admin user create --email nobody@example.com")
	out, _ = c.run(cli.ExitOK, "", "admins", "list")
	contains(t, "admins list after the refusal", out, "page 1/1, 3 items")

	_, errOut = c.run(cli.ExitUsage, "", "admins", "create", "--user", "demo", "--role", "admin")
	contains(t, "admins create --user demo", errOut, `--user "demo": want the person's email address or user ID (a UUID)`)
}
