package cli_test

import (
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

// TestClientAppsAgainstAdminAPI: a native client and its web origins
// through the real admin API (at the newest state format): created,
// shown, refused with the API's detail (a private-use redirect on a web
// client, a confidential native one), set to none and back to the
// default.
func TestClientAppsAgainstAdminAPI(t *testing.T) {
	c := newCLIConfig(t, nil, func(cfg *admin.Config) {
		if err := cfg.Applier.(*fsmtest.Applier).SetFormat(fsm.CurrentFormat); err != nil {
			t.Fatal(err)
		}
	})
	org := c.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme Inc.")
	out, _ := c.run(cli.ExitOK, "", "client", "create", "--name", "Desktop", "--org", org, "--type", "public", "--client-id", "desk",
		"--application-type", "native", "--redirect-uri", "com.example.app:/cb", "--redirect-uri", "http://127.0.0.1/cb")
	contains(t, "client create", out, "application_type    native\n", "web_origins         http://127.0.0.1\n                    (default: from the redirect URIs)\n")
	_, errOut := c.run(cli.ExitServerError, "", "client", "update", "desk", "--application-type", "web")
	contains(t, "back to web", errOut, "error: VALIDATION_ERROR: ", "\n  redirect_uris[0]: ", "application_type native")
	_, errOut = c.run(cli.ExitServerError, "", "client", "create", "--name", "Secret", "--org", org, "--application-type", "native",
		"--redirect-uri", "com.example.app:/cb")
	contains(t, "confidential native", errOut, "\n  application_type: ", "public")
	out, _ = c.run(cli.ExitOK, "", "client", "update", "desk", "--web-origins", "https://App.example:443")
	contains(t, "origins", out, "web_origins         https://app.example\n")
	out, _ = c.run(cli.ExitOK, "", "client", "update", "desk", "--web-origins=")
	contains(t, "none", out, "web_origins         none\n")
	out, _ = c.run(cli.ExitOK, "", "client", "update", "desk", "--web-origins", "default")
	contains(t, "the default", out, "web_origins         http://127.0.0.1\n                    (default")
	out, _ = c.run(cli.ExitOK, "", "client", "list")
	contains(t, "list", out, "APP", "native")
	out, _ = c.run(cli.ExitOK, "", "client", "create", "--help")
	contains(t, "help", out, "--application-type", "--web-origins", "private-use")
}
