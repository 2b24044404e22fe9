package cli_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

// calls records the calls the admin API receives, as "METHOD /path?query".
type calls struct {
	mu  sync.Mutex
	got []string
}

func (r *calls) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		call := req.Method + " " + req.URL.EscapedPath()
		if req.URL.RawQuery != "" {
			call += "?" + req.URL.RawQuery
		}
		r.mu.Lock()
		r.got = append(r.got, call)
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

func (r *calls) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// since is the calls after the first n.
func (r *calls) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got[n:]...)
}

// newPeopleCLI is a CLI over the real admin API, which sends mail and
// keeps links to identity providers, with every call it receives noted,
// an organization acme and a person demo@example.com.
func newPeopleCLI(t *testing.T) (c *cliHarness, rec *calls, org, id string) {
	t.Helper()
	rec = &calls{}
	c = newCLIConfig(t, rec.wrap, func(cfg *admin.Config) {
		cfg.Mail, cfg.Issuer = true, "https://id.example"
		if err := cfg.Applier.(*fsmtest.Applier).SetFormat(fsm.CurrentFormat); err != nil {
			t.Fatal(err)
		}
	})
	org = c.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme")
	id = c.field("id", "", "user", "create", "--email", "demo@example.com")
	return c, rec, org, id
}

// personCase is one verb that names a person. In args, call and want,
// <who> is the person as given, <id> their user ID and <org> acme's.
type personCase struct {
	name    string
	flag    string   // how a usage error names the person
	args    []string // the command
	prepare []string // a command run first, with the person's ID
	code    int      // the exit code; 0 is ExitOK
	call    string   // the verb's own call to the admin API
	want    []string // in stdout
	lines   int      // when set, how many lines stdout has
}

const otherIdentity = "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b"

var personCases = []personCase{
	{name: "user get", args: []string{"user", "get", "<who>"},
		call: "GET /admin/v1/users/<id>", want: []string{"<id>", "demo@example.com"}},
	{name: "user update", args: []string{"user", "update", "<who>", "--phone", "+15551234567"},
		call: "PATCH /admin/v1/users/<id>", want: []string{"<id>", "+15551234567"}},
	{name: "user delete", args: []string{"user", "delete", "<who>"},
		call: "DELETE /admin/v1/users/<id>", want: []string{"deleted user <id>\n"}},
	{name: "user totp", args: []string{"user", "totp", "<who>"},
		call: "POST /admin/v1/users/<id>/totp", want: []string{"otpauth://totp/"}},
	{name: "user recovery-codes", args: []string{"user", "recovery-codes", "<who>"},
		call: "POST /admin/v1/users/<id>/recovery-codes", lines: 10},
	{name: "user totp-remove", prepare: []string{"user", "totp", "<id>"}, args: []string{"user", "totp-remove", "<who>"},
		call: "DELETE /admin/v1/users/<id>/totp", want: []string{"removed authenticator app of user <id>\n"}},
	{name: "user factors", args: []string{"user", "factors", "<who>"},
		call: "GET /admin/v1/users/<id>/factors", want: []string{"authenticator app", "passkeys"}},
	{name: "user unlock", args: []string{"user", "unlock", "<who>"},
		call: "DELETE /admin/v1/users/<id>/lockouts", want: []string{"removed lockouts of user <id>\n"}},
	{name: "user verify-email", args: []string{"user", "verify-email", "<who>"},
		call: "POST /admin/v1/users/<id>/verify-email", want: []string{"sent a link to demo@example.com"}},
	{name: "user identities", args: []string{"user", "identities", "<who>"},
		call: "GET /admin/v1/users/<id>/identities", want: []string{"no identities"}},
	{name: "user unlink", args: []string{"user", "unlink", "<who>", otherIdentity}, code: cli.ExitServerError,
		call: "DELETE /admin/v1/users/<id>/identities/" + otherIdentity},
	{name: "membership create", flag: "--user", args: []string{"membership", "create", "--user", "<who>", "--org", "<org>"},
		call: "POST /admin/v1/memberships", want: []string{"<id>", "<org>", "active"}},
	{name: "membership list", flag: "--user", prepare: []string{"membership", "create", "--user", "<id>", "--org", "<org>"},
		args: []string{"membership", "list", "--user", "<who>"},
		call: "GET /admin/v1/memberships?user_id=<id>", want: []string{"<id>", "<org>", "1 item"}},
}

func fill(s, who, id, org string) string {
	return strings.NewReplacer("<who>", who, "<id>", id, "<org>", org).Replace(s)
}

func fillAll(ss []string, who, id, org string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fill(s, who, id, org)
	}
	return out
}

// TestPersonByAddressOrID: every verb about one person takes their
// address, looked up first (GET /users?email=), or their user ID, sent as
// it is without a lookup; either way the verb's own call names the user
// ID.
func TestPersonByAddressOrID(t *testing.T) {
	for _, tc := range personCases {
		for _, by := range []string{"address", "ID"} {
			t.Run(tc.name+" by "+by, func(t *testing.T) {
				c, rec, org, id := newPeopleCLI(t)
				if tc.prepare != nil {
					c.run(cli.ExitOK, "", fillAll(tc.prepare, id, id, org)...)
				}
				who, calls := id, []string{fill(tc.call, "", id, org)}
				if by == "address" {
					who = "demo@example.com"
					calls = append([]string{"GET /admin/v1/users?email=demo%40example.com"}, calls...)
				}
				n := rec.count()
				out, _ := c.run(tc.code, "", fillAll(tc.args, who, id, org)...)
				if got := rec.since(n); !slices.Equal(got, calls) {
					t.Errorf("calls %q, want %q", got, calls)
				}
				contains(t, tc.name, out, fillAll(tc.want, who, id, org)...)
				if tc.lines != 0 && strings.Count(out, "\n") != tc.lines {
					t.Errorf("%s: %d lines, want %d:\n%s", tc.name, strings.Count(out, "\n"), tc.lines, out)
				}
			})
		}
	}

	// A write by address is still a write: --stale is refused before the
	// lookup.
	c, rec, _, _ := newPeopleCLI(t)
	n := rec.count()
	_, errOut := c.run(cli.ExitUsage, "", "user", "delete", "demo@example.com", "--stale")
	contains(t, "user delete --stale", errOut, "--stale is for commands that read")
	if got := rec.since(n); len(got) != 0 {
		t.Errorf("user delete --stale called %q", got)
	}
	// A read by address with --stale reads the node's own copy, the
	// lookup too.
	n = rec.count()
	out, _ := c.run(cli.ExitOK, "", "user", "get", "demo@example.com", "--stale")
	contains(t, "user get --stale", out, "demo@example.com")
	if got := rec.since(n); len(got) != 2 || !strings.HasSuffix(got[0], "stale=true") || !strings.HasSuffix(got[1], "?stale=true") {
		t.Errorf("user get --stale: calls %q, want both stale", got)
	}
}

// TestPersonUnknownAddress: an address no person has is said so, with
// where to look, and the command ends after the lookup, without the
// verb's own call.
func TestPersonUnknownAddress(t *testing.T) {
	c, rec, org, id := newPeopleCLI(t)
	for _, tc := range personCases {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t // a failure ends this case alone
			n := rec.count()
			_, errOut := c.run(cli.ExitServerError, "", fillAll(tc.args, "nobody@example.com", id, org)...)
			contains(t, tc.name, errOut, "error: no person has the address nobody@example.com\n",
				`hint: "oidcd admin user list" lists the people; "oidcd admin user create --email nobody@example.com" adds one`)
			if got, want := rec.since(n), []string{"GET /admin/v1/users?email=nobody%40example.com"}; !slices.Equal(got, want) {
				t.Errorf("calls %q, want only the lookup %q", got, want)
			}
		})
	}
	c.t = t
	if _, err := c.state.User(id); err != nil {
		t.Errorf("demo@example.com is gone: %v", err)
	}
}

// TestPersonMalformed: a person given as neither an address nor a UUID
// is a usage error naming the argument or flag, and nothing is sent.
func TestPersonMalformed(t *testing.T) {
	c, rec, org, id := newPeopleCLI(t)
	for _, tc := range personCases {
		for _, bad := range []string{"demo", "u1", otherIdentity[:23], otherIdentity + "x"} {
			t.Run(tc.name+" "+bad, func(t *testing.T) {
				c.t = t // a failure ends this case alone
				flag := tc.flag
				if flag == "" {
					flag = "ADDRESS|ID"
				}
				n := rec.count()
				_, errOut := c.run(cli.ExitUsage, "", fillAll(tc.args, bad, id, org)...)
				contains(t, tc.name, errOut, "error: "+flag+` "`+bad+`": want the person's email address or user ID (a UUID)`)
				if got := rec.since(n); len(got) != 0 {
					t.Errorf("a usage error called %q", got)
				}
			})
		}
	}
}
