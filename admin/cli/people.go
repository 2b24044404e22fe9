package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// An operator knows people by their address, the admin API by their user
// ID. Every verb about one person (the user verbs with ADDRESS|ID, and the
// --user of admins create and of membership create and list) takes either:
// a UUID is sent as it is; an address is looked up first (GET
// /users?email=, as the console does), and an address no person has is
// said so, with where to look, before the verb's own call is made;
// anything else is a usage error, sent nowhere.

// personArg is the name of the argument of a verb about one person.
const personArg = "ADDRESS|ID"

// personArgs are the arguments of a verb about one person and nothing
// else.
var personArgs = []string{personArg}

// personFlagUsage is the help of a --user flag that names one person.
const personFlagUsage = "the person: their email `address` or user ID"

// isUUID reports whether s is a UUID in its canonical text form (any
// case), which is how the admin API writes user ids.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}

// personName checks v, the person given as what (a flag such as --user or
// the argument ADDRESS|ID): a user ID or an email address, trimmed.
func personName(what, v string) (string, error) {
	who := strings.TrimSpace(v)
	if !isUUID(who) && !strings.Contains(who, "@") {
		return "", errUsage("%s %q: want the person's email address or user ID (a UUID)", what, who)
	}
	return who, nil
}

// forPerson is the request that build makes for the user ID of who (from
// personName): at once for an ID; for an address, once the lookup has
// found the person, so that an address no person has ends the command
// before the verb's call.
func forPerson(who string, build func(id string) *request) *request {
	if isUUID(who) {
		return build(who)
	}
	// The method is the verb's, for the --stale check of runVerb.
	req := &request{method: build(who).method}
	req.run = func(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
		id, code := c.userByEmail(ctx, who, stderr)
		if code != ExitOK {
			return code
		}
		return c.call(ctx, build(id), asJSON, stdout, stderr)
	}
	return req
}

// aboutPerson is the setup of a verb whose first argument is a person
// (ADDRESS|ID): setup registers the verb's flags and reads them, once,
// into the function that makes the request for a user ID.
func aboutPerson(setup func(fs *flag.FlagSet) func(in *inv) (func(id string) *request, error)) func(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(fs *flag.FlagSet) func(in *inv) (*request, error) {
		parse := setup(fs)
		return func(in *inv) (*request, error) {
			build, err := parse(in)
			if err != nil {
				return nil, err
			}
			who, err := personName(personArg, in.args[0])
			if err != nil {
				return nil, err
			}
			return forPerson(who, build), nil
		}
	}
}

// personCall is the setup of a verb about a person that has no flags of
// its own: build makes its request for a user ID.
func personCall(build func(id string) *request) func(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return aboutPerson(func(*flag.FlagSet) func(*inv) (func(string) *request, error) {
		return func(*inv) (func(string) *request, error) { return build, nil }
	})
}

// userByEmail is the id of the person with the address email, or a
// printed failure: an address no person has is said so, with where to
// look.
func (c *conn) userByEmail(ctx context.Context, email string, stderr io.Writer) (string, int) {
	a, code := c.send(ctx, &request{method: http.MethodGet, path: "/users", query: url.Values{"email": {email}}}, stderr)
	if code != ExitOK {
		return "", code
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.body, &list); err != nil {
		fmt.Fprintf(stderr, "error: HTTP %d: %v (correlation id %s)\n", a.status, err, a.correlationID(""))
		return "", ExitServerError
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		fmt.Fprintf(stderr, "error: no person has the address %s\nhint: \"oidcd admin user list\" lists the people; \"oidcd admin user create --email %s\" adds one\n", clean(email), clean(email))
		return "", ExitServerError
	}
	return list.Data[0].ID, ExitOK
}
