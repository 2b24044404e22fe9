package cli

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/oidcd/oidcd/internal/i18n"
)

// The people's own way in, from the command line: invitations, a user's
// address check, an organization's registration settings.

// Bounds of an invitation's lifetime, as the server takes them.
const (
	minInvitationLifetime = time.Hour
	maxInvitationLifetime = 30 * 24 * time.Hour
)

var invitationStatuses = []string{"pending", "accepted", "expired"}

func invitationCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	addr := fs.String("email", "", "the `address` to invite (required)")
	org := fs.String("org", "", "organization `ID` to join (required)")
	var expires secondsFlag
	fs.Var(&expires, "expires-in", "how long the link works, in `seconds` or as a duration like 72h, from 1h to 720h (default: the server's, 7 days)")
	locale := localeFlag(fs)
	return func(in *inv) (*request, error) {
		if err := required("email", *addr, "org", *org); err != nil {
			return nil, err
		}
		b := map[string]any{"email": *addr, "organization_id": *org}
		if err := locale(in, b); err != nil {
			return nil, err
		}
		if in.given("expires-in") {
			if d := time.Duration(expires.n) * time.Second; d < minInvitationLifetime || d > maxInvitationLifetime {
				return nil, errUsage("--expires-in must be from 1h to 720h (30 days)")
			}
			b["expires_in"] = expires.n
		}
		return &request{method: http.MethodPost, path: "/invitations", body: b, show: invitationTable.one,
			note: func([]byte) string {
				return "the invitation is on its way; withdraw it with: oidcd admin invitation delete ID"
			}}, nil
	}
}

func invitationList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	org := fs.String("org", "", "only the invitations to this organization `ID`")
	status := fs.String("status", "", "only those of this `status`: pending, accepted or expired")
	pages := pageFlags(fs)
	return func(in *inv) (*request, error) {
		q, err := pages(in)
		if err != nil {
			return nil, err
		}
		if in.given("org") {
			q.Set("organization_id", *org)
		}
		if in.given("status") {
			if err := checkEnum("status", *status, invitationStatuses); err != nil {
				return nil, err
			}
			q.Set("status", *status)
		}
		return &request{method: http.MethodGet, path: "/invitations", query: q, show: invitationTable.list}, nil
	}
}

func invitationDelete(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		id := in.args[0]
		return &request{method: http.MethodDelete, path: idPath("/invitations", id), show: func(w io.Writer, _ []byte) error {
			_, err := fmt.Fprintf(w, "withdrew invitation %s; its link no longer works\n", clean(id))
			return err
		}}, nil
	}
}

// localeFlag is --locale, the language of a message sent: it adds the
// body's locale when given, one of the mail's languages.
func localeFlag(fs *flag.FlagSet) func(in *inv, body map[string]any) error {
	locale := fs.String("locale", "", "the `language` of the message: "+strings.Join(i18n.Tags(), ", ")+" (default: en)")
	return func(in *inv, body map[string]any) error {
		if !in.given("locale") {
			return nil
		}
		if err := checkEnum("locale", *locale, i18n.Tags()); err != nil {
			return err
		}
		body["locale"] = *locale
		return nil
	}
}

func userVerifyEmail(fs *flag.FlagSet) func(in *inv) (func(id string) *request, error) {
	locale := localeFlag(fs)
	return func(in *inv) (func(id string) *request, error) {
		b := map[string]any{}
		if err := locale(in, b); err != nil {
			return nil, err
		}
		var send any // no body without --locale: the server's default
		if len(b) > 0 {
			send = b
		}
		return func(id string) *request {
			return &request{method: http.MethodPost, path: idPath("/users", id) + "/verify-email", body: send, show: func(w io.Writer, body []byte) error {
				obj, err := decodeObject(body)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(w, "sent a link to %s; it works until %s\n", text(obj["email"]), text(obj["expires_at"]))
				return err
			}}
		}, nil
	}
}

func orgUpdate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	name := fs.String("name", "", "new display `name`")
	registration := fs.String("registration", "", "self-registration: `on` or off")
	var domains listFlag
	domains.split = true
	fs.Var(&domains, "email-domains", "the `domains` whose addresses may register, comma-separated or repeated; replaces the list")
	var brand brandingFlags
	brand.register(fs, "branding-")
	return func(in *inv) (*request, error) {
		b := map[string]any{}
		bb, err := brand.body(in)
		if err != nil {
			return nil, err
		}
		if len(bb) > 0 {
			b["branding"] = bb
		}
		if in.given("name") {
			b["name"] = *name
		}
		reg := map[string]any{}
		if in.given("registration") {
			if err := checkEnum("registration", *registration, []string{"on", "off"}); err != nil {
				return nil, err
			}
			reg["enabled"] = *registration == "on"
		}
		if in.given("email-domains") {
			reg["email_domains"] = domains.list()
		}
		if len(reg) > 0 {
			b["registration"] = reg
		}
		if len(b) == 0 {
			return nil, errUsage("nothing to update: give at least one of --name, --registration, --email-domains, --branding-...")
		}
		return &request{method: http.MethodPatch, path: idPath("/organizations", in.args[0]), body: b, show: orgTable.one}, nil
	}
}
