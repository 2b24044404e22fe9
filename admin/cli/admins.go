package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
)

// Administrator grants name their person by user id, which no one
// remembers: `admins create --user` takes the person's address too (found
// through GET /users?email=, as the console's form does), and `admins list`
// shows each person's address beside the id (GET /users/{id} for each
// person of the page). These are verbs of several calls; with --json
// each prints the server's own answer to the grant call.

// emailMark is a key that no server field uses: the grant's person's
// address, which these verbs look up.
const emailMark = "\x00email"

func grantList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	pages := pageFlags(fs)
	return func(in *inv) (*request, error) {
		q, err := pages(in)
		if err != nil {
			return nil, err
		}
		req := &request{method: http.MethodGet, path: "/admins", query: q}
		req.run = func(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
			a, code := c.send(ctx, req, stderr)
			if code != ExitOK {
				return code
			}
			if asJSON {
				stdout.Write(prettyJSON(a.body))
				return ExitOK
			}
			var page struct {
				Data []struct {
					UserID string `json:"user_id"`
				} `json:"data"`
			}
			_ = json.Unmarshal(a.body, &page) // a body list cannot read fails there, below
			ids := make([]string, 0, len(page.Data))
			for _, g := range page.Data {
				ids = append(ids, g.UserID)
			}
			return showGrants(stdout, stderr, a, true, c.emails(ctx, ids))
		}
		return req, nil
	}
}

func grantCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	user := fs.String("user", "", personFlagUsage+" (required)")
	role := fs.String("role", "", "`role`: admin, org_admin or auditor (required)")
	org := fs.String("org", "", "organization `ID` of an org_admin")
	return func(in *inv) (*request, error) {
		if err := required("user", *user, "role", *role); err != nil {
			return nil, err
		}
		who, err := personName("--user", *user)
		if err != nil {
			return nil, err
		}
		b, err := roleBody(*role, *org, in)
		if err != nil {
			return nil, err
		}
		req := &request{method: http.MethodPost, path: "/admins", body: b}
		req.run = func(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
			emails := map[string]string{}
			id := who
			if !isUUID(who) {
				var code int
				if id, code = c.userByEmail(ctx, who, stderr); code != ExitOK {
					return code
				}
				emails[id] = who
			}
			b["user_id"] = id
			a, code := c.send(ctx, req, stderr)
			if code != ExitOK {
				return code
			}
			if asJSON {
				stdout.Write(prettyJSON(a.body))
				return ExitOK
			}
			if len(emails) == 0 {
				emails = c.emails(ctx, []string{id})
			}
			return showGrants(stdout, stderr, a, false, emails)
		}
		return req, nil
	}
}

// showGrants shows a's grants, a page of them (list) or one, each with
// its person's address from emails ("-" when unknown).
func showGrants(stdout, stderr io.Writer, a *answer, list bool, emails map[string]string) int {
	v := grantTable
	v.prep = func(row map[string]any) {
		if id, _ := row["user_id"].(string); emails[id] != "" {
			row[emailMark] = emails[id]
		}
	}
	show := v.one
	if list {
		show = v.list
	}
	if err := show(stdout, a.body); err != nil {
		fmt.Fprintf(stderr, "error: HTTP %d: %v (correlation id %s)\n", a.status, err, a.correlationID(""))
		return ExitServerError
	}
	return ExitOK
}

// send makes req's one call and prints a failure; on ExitOK a is a 2xx
// answer.
func (c *conn) send(ctx context.Context, req *request, stderr io.Writer) (*answer, int) {
	a, err := c.do(ctx, req)
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
		return nil, ExitUnreachable
	}
	if a.status < 200 || a.status > 299 {
		return nil, failed(stderr, a)
	}
	return a, ExitOK
}

// emails looks up the address of each person of ids (GET /users/{id},
// once a person). A person it cannot read (gone, or out of the
// credential's reach) has none: the grant still shows, with "-".
func (c *conn) emails(ctx context.Context, ids []string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		if _, done := out[id]; done || !isUUID(id) {
			continue
		}
		out[id] = ""
		a, err := c.do(ctx, &request{method: http.MethodGet, path: idPath("/users", id)})
		if err != nil || a.status != http.StatusOK {
			continue
		}
		var u struct {
			Email string `json:"email"`
		}
		if json.Unmarshal(a.body, &u) == nil {
			out[id] = u.Email
		}
	}
	return out
}
