package cli_test

import (
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin/cli"
)

// TestClientRateLimitAgainstAdminAPI: client create and update
// --rate-limit through the real admin API: the value is shown, a bad one
// is refused with the API's detail, and --rate-limit= removes it.
func TestClientRateLimitAgainstAdminAPI(t *testing.T) {
	c := newCLI(t)
	org := c.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme Inc.")
	out, _ := c.run(cli.ExitOK, "", "client", "create", "--name", "Portal", "--org", org,
		"--redirect-uri", "https://portal.example.com/cb", "--client-id", "portal", "--rate-limit", "600/60s")
	contains(t, "client create", out, "rate_limit          600/60s")
	out, _ = c.run(cli.ExitOK, "", "client", "get", "portal")
	contains(t, "client get", out, "rate_limit          600/60s")
	_, errOut := c.run(cli.ExitServerError, "", "client", "update", "portal", "--rate-limit", "lots")
	contains(t, "bad rate limit", errOut, "error: VALIDATION_ERROR: ", "\n  rate_limit: ", "N/duration")
	_, errOut = c.run(cli.ExitServerError, "", "client", "update", "portal", "--rate-limit", "off")
	contains(t, "off", errOut, "\n  rate_limit: ", "cannot be off")
	out, _ = c.run(cli.ExitOK, "", "client", "update", "portal", "--rate-limit", "20/1m")
	contains(t, "client update", out, "rate_limit          20/1m")
	out, _ = c.run(cli.ExitOK, "", "client", "update", "portal", "--rate-limit=")
	if strings.Contains(out, "rate_limit") {
		t.Errorf("after --rate-limit=: got %q, want no rate_limit", out)
	}
	out, _ = c.run(cli.ExitOK, "", "client", "create", "--help")
	contains(t, "help", out, "--rate-limit", "N/DURATION")
}
