package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
)

// maxLockoutPeople bounds how many people one lockout list looks up.
const maxLockoutPeople = 50

// lockoutList lists what is locked now. Where the answer names a person
// (user_id), the table shows the person's address beside the id, looked
// up with GET /users/{id} (at most maxLockoutPeople of them; a person the
// credential may not read keeps the id alone). --json prints the API's
// answer as it is.
func lockoutList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{run: func(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
			list := &request{method: http.MethodGet, path: "/lockouts", show: func(w io.Writer, body []byte) error {
				return showLockouts(ctx, c, w, body)
			}}
			return c.call(ctx, list, asJSON, stdout, stderr)
		}}, nil
	}
}

// showLockouts prints the lockouts of body, each person named.
func showLockouts(ctx context.Context, c *conn, w io.Writer, body []byte) error {
	var page struct {
		Data []map[string]any `json:"data"`
	}
	if err := decode(body, &page); err != nil {
		return err
	}
	if len(page.Data) == 0 {
		fmt.Fprintln(w, "no lockouts")
		return nil
	}
	emails := map[string]string{}
	for _, row := range page.Data {
		id, _ := row["user_id"].(string)
		if id == "" {
			continue
		}
		email, seen := emails[id]
		if !seen && len(emails) < maxLockoutPeople {
			email = personEmail(ctx, c, id)
			emails[id] = email
		}
		if email != "" {
			row["person"] = email + " (" + id + ")"
		}
	}
	return writeTable(w, lockoutTable.cols, page.Data)
}

// personEmail is the address of the person id, "" when it cannot be read.
func personEmail(ctx context.Context, c *conn, id string) string {
	a, err := c.do(ctx, &request{method: http.MethodGet, path: idPath("/users", id)})
	if err != nil || a.status != http.StatusOK {
		return ""
	}
	var u struct {
		Email string `json:"email"`
	}
	if json.Unmarshal(a.body, &u) != nil {
		return ""
	}
	return u.Email
}
