package cli

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
)

// Identity providers (federation, docs/operators/federation.md): idp
// create|list|show|update|delete, and a person's links to them, user
// identities and user unlink.

var (
	idpTable = view{plural: "identity providers", cols: []column{
		col("ID", "id"), col("SLUG", "slug"), col("NAME", "display_name"), col("ISSUER", "issuer"), col("ORG", "organization_id"),
		col("PROVISIONING", "provisioning"), col("ENABLED", "enabled"),
	}}
	identityTable = view{plural: "identities", cols: []column{
		col("ID", "id"), col("PROVIDER", "provider_id"), col("SUBJECT", "subject"), col("EMAIL", "email"),
		col("LINKED_AT", "linked_at"), col("LAST_USED_AT", "last_used_at"),
	}}
)

// idpFields is the order of one provider's fields; the addresses to
// register at the upstream come after them, apart (showIdP).
var idpFields = []string{"id", "slug", "display_name", "issuer", "client_id", "client_secret_set", "scopes", "organization_id",
	"email_domains", "provisioning", "memberships", "trust_mfa", "backchannel_logout", "end_upstream_session", "enabled",
	"created_at", "updated_at"}

// showIdP prints one provider, then the three addresses to register at
// the upstream, labelled, each with whether it is needed.
func showIdP(w io.Writer, body []byte) error {
	obj, err := decodeObject(body)
	if err != nil {
		return err
	}
	uri := func(k string) string {
		s, _ := obj[k].(string)
		delete(obj, k)
		return clean(s)
	}
	redirect, bcl, postLogout := uri("redirect_uri"), uri("backchannel_logout_uri"), uri("post_logout_redirect_uri")
	if err := writeFields(w, obj, idpFields); err != nil {
		return err
	}
	if redirect == "" {
		return nil // an answer of another shape: nothing more to say
	}
	when := func(flag, name string) string {
		if on, _ := obj[flag].(bool); !on {
			return " (only needed with " + name + ")"
		}
		return ""
	}
	clientID, _ := obj["client_id"].(string)
	fmt.Fprintf(w, "\nregister at the upstream, for its client %s:\n", clean(clientID))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  redirect URI\t%s\n", redirect)
	fmt.Fprintf(tw, "  back-channel logout URI\t%s%s\n", bcl, when("backchannel_logout", "--backchannel-logout, the default"))
	fmt.Fprintf(tw, "  post-logout redirect URI\t%s%s\n", postLogout, when("end_upstream_session", "--end-upstream-session"))
	return tw.Flush()
}

// idpFlags are the flags of idp create and update; only the ones given
// are sent.
type idpFlags struct {
	slug, displayName, issuer, clientID, secret, secretFile string
	org, provisioning, membershipOrg, groupsClaim           string
	scopes, domains, groupOrgs                              listFlag
	trustMFA, backchannel, endUpstream, enabled             bool
}

var provisioningModes = []string{"create", "link", "create_or_link", "off"}

func (f *idpFlags) register(fs *flag.FlagSet, create bool) {
	req := ""
	if create {
		req = " (required)"
	}
	f.scopes.split, f.domains.split = true, true
	fs.StringVar(&f.slug, "slug", "", "short unique `name`: lowercase letters, digits and hyphens, at most 40; in the provider's URLs and in idp_hint"+req)
	fs.StringVar(&f.displayName, "display-name", "", "the sign-in button's `text`: \"Continue with\" and this"+req)
	fs.StringVar(&f.issuer, "issuer", "", "the upstream's issuer `URL`, exactly as its discovery document names it (https; http only at 127.0.0.1, [::1] or localhost)"+req)
	fs.StringVar(&f.clientID, "client-id", "", "the client `ID` the upstream issued"+req)
	fs.StringVar(&f.secretFile, "client-secret-file", "", "read the client secret the upstream issued from `FILE` (- for standard input), up to its end or a trailing newline"+req)
	fs.StringVar(&f.secret, "client-secret", "", "the client `secret` itself (visible in the process list and shell history; prefer --client-secret-file)")
	fs.Var(&f.scopes, "scope", "`scope` asked of the upstream; repeat or comma-separate; must hold openid (default: the server's, openid,email,profile)")
	fs.StringVar(&f.org, "org", "", "organization `ID` whose own provider this is, managed by its org_admins (default: none, the site's; --org= on update makes it the site's)")
	fs.Var(&f.domains, "email-domain", "`domain` the upstream is authoritative for (admins only); repeat or comma-separate; --email-domain= for none")
	fs.StringVar(&f.provisioning, "provisioning", "", "what a first sign-in of someone unknown does, a `mode`: create, link, create_or_link or off (default: the server's, create)")
	fs.StringVar(&f.membershipOrg, "membership-org", "", "organization `ID` every person signed in through the provider is a member of (default: the provider's own)")
	fs.StringVar(&f.groupsClaim, "groups-claim", "", "the upstream ID token's `claim` that lists a person's groups, e.g. groups")
	fs.Var(&f.groupOrgs, "group-org", "`GROUP=ORG_ID`: members of the upstream group are members of the organization; repeat for several")
	fs.BoolVar(&f.trustMFA, "trust-mfa", false, "take the upstream's word that the person used a second factor")
	fs.BoolVar(&f.backchannel, "backchannel-logout", true, "accept the upstream's back-channel logout tokens (=false to refuse them)")
	fs.BoolVar(&f.endUpstream, "end-upstream-session", false, "a logout here also ends the person's session at the upstream")
	fs.BoolVar(&f.enabled, "enabled", true, "people may sign in through the provider (=false to stop them, keeping its links)")
}

func (f *idpFlags) body(in *inv) (map[string]any, error) {
	b := map[string]any{}
	for flagName, v := range map[string]struct {
		field string
		val   any
	}{
		"slug": {"slug", f.slug}, "display-name": {"display_name", f.displayName}, "issuer": {"issuer", f.issuer},
		"client-id": {"client_id", f.clientID}, "org": {"organization_id", f.org}, "provisioning": {"provisioning", f.provisioning},
		"trust-mfa": {"trust_mfa", f.trustMFA}, "backchannel-logout": {"backchannel_logout", f.backchannel},
		"end-upstream-session": {"end_upstream_session", f.endUpstream}, "enabled": {"enabled", f.enabled},
	} {
		if in.given(flagName) {
			b[v.field] = v.val
		}
	}
	if in.given("provisioning") {
		if err := checkEnum("provisioning", f.provisioning, provisioningModes); err != nil {
			return nil, err
		}
	}
	if in.given("scope") {
		b["scopes"] = f.scopes.list()
	}
	if in.given("email-domain") {
		b["email_domains"] = f.domains.list()
	}
	switch {
	case in.given("client-secret") && in.given("client-secret-file"):
		return nil, errUsage("give --client-secret-file or --client-secret, not both")
	case in.given("client-secret"):
		if f.secret == "" {
			return nil, errUsage("--client-secret is empty")
		}
		b["client_secret"] = f.secret
	case in.given("client-secret-file"):
		s, err := readSecretFile(f.secretFile, in.stdin)
		if err != nil {
			return nil, err
		}
		b["client_secret"] = s
	}
	// The memberships are one object, replaced whole: any of its flags
	// sends it with what the flags given say.
	if in.given("membership-org") || in.given("groups-claim") || in.given("group-org") {
		m := map[string]any{}
		if f.membershipOrg != "" {
			m["organization_id"] = f.membershipOrg
		}
		if f.groupsClaim != "" {
			m["groups_claim"] = f.groupsClaim
		}
		if groups := f.groupOrgs.list(); len(groups) > 0 {
			g := map[string]string{}
			for _, v := range groups {
				i := strings.LastIndex(v, "=")
				if i <= 0 || i == len(v)-1 {
					return nil, errUsage("--group-org %q: want GROUP=ORG_ID", v)
				}
				g[v[:i]] = v[i+1:]
			}
			m["group_organizations"] = g
		}
		b["memberships"] = m
	}
	return b, nil
}

// readSecretFile reads a secret from file, or from stdin for "-", without
// its trailing line break.
func readSecretFile(file string, stdin io.Reader) (string, error) {
	if file == "-" {
		s, err := readPassword(stdin)
		if err != nil {
			return "", errUsage("--client-secret-file -: %v", strings.TrimPrefix(err.Error(), "--password-stdin: "))
		}
		return s, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", errUsage("--client-secret-file: %v", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", errUsage("--client-secret-file: %s is empty", file)
	}
	return s, nil
}

func idpCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var f idpFlags
	f.register(fs, true)
	return func(in *inv) (*request, error) {
		if err := required("slug", f.slug, "display-name", f.displayName, "issuer", f.issuer, "client-id", f.clientID); err != nil {
			return nil, err
		}
		if !in.given("client-secret-file") && !in.given("client-secret") {
			return nil, errUsage("--client-secret-file is required (the secret the upstream issued; - reads it from standard input)")
		}
		b, err := f.body(in)
		if err != nil {
			return nil, err
		}
		return &request{method: http.MethodPost, path: "/identity-providers", body: b, show: showIdP}, nil
	}
}

func idpUpdate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var f idpFlags
	f.register(fs, false)
	return func(in *inv) (*request, error) {
		b, err := f.body(in)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, errUsage("nothing to update: give at least one flag (see -h)")
		}
		return &request{method: http.MethodPatch, path: idPath("/identity-providers", in.args[0]), body: b, show: showIdP}, nil
	}
}

func idpList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: "/identity-providers", show: idpTable.list}, nil
	}
}

func idpShow(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: idPath("/identity-providers", in.args[0]), show: showIdP}, nil
	}
}

func userIdentities(id string) *request {
	return &request{method: http.MethodGet, path: idPath("/users", id) + "/identities", show: identityTable.list}
}

func userUnlink(fs *flag.FlagSet) func(in *inv) (func(id string) *request, error) {
	return func(in *inv) (func(id string) *request, error) {
		identity := in.args[1]
		return func(user string) *request {
			return &request{method: http.MethodDelete, path: idPath(idPath("/users", user)+"/identities", identity), show: func(w io.Writer, _ []byte) error {
				_, err := fmt.Fprintf(w, "unlinked identity %s of user %s\n", clean(identity), clean(user))
				return err
			}}
		}, nil
	}
}

// idpNoun is the idp command.
func idpNoun() noun {
	return noun{name: "idp", aliases: []string{"idps", "identity-provider", "identity-providers"},
		summary: "identity providers: other OpenID providers people sign in through (federation)", verbs: []verb{
			{name: "create", synopsis: "--slug S --display-name N --issuer URL --client-id ID --client-secret-file FILE|- [--scope S...] [--org O] [--email-domain D...] [--provisioning create|link|create_or_link|off] [--membership-org O] [--groups-claim C] [--group-org GROUP=ORG_ID...] [--trust-mfa] [--backchannel-logout=false] [--end-upstream-session] [--enabled=false]",
				summary: "register an upstream OpenID provider; prints the addresses to register at it",
				details: "Register a client at the upstream first, or after: its redirect URI is\n" +
					"{issuer}/federation/{slug}/callback on this provider's issuer, printed below\n" +
					"the provider with its back-channel logout URI and post-logout redirect URI.\n" +
					"The client secret is read from --client-secret-file (- for standard input),\n" +
					"sealed at rest and never shown again.\n\n" +
					"--org makes it an organization's own provider, which that organization's\n" +
					"org_admins manage (theirs may grant memberships in it alone); without it\n" +
					"it is the site's, an admin's. --email-domain lists the domains the upstream\n" +
					"is authoritative for: only for these may a first sign-in link to an existing\n" +
					"person by a verified address. Only an admin sets it.\n\n" +
					"--provisioning says what the first sign-in of someone unknown does: create a\n" +
					"person (the default), link to an existing one by address, either\n" +
					"(create_or_link), or neither (off). --membership-org, --groups-claim and\n" +
					"--group-org make people signed in through it members of organizations.\n\n" +
					"Example, a Keycloak realm:\n" +
					"  oidcd admin idp create --slug staff --display-name \"Staff account\" \\\n" +
					"      --issuer https://sso.example.com/realms/staff --client-id oidcd \\\n" +
					"      --client-secret-file /run/secrets/keycloak-oidcd",
				setup: idpCreate},
			{name: "list", summary: "list identity providers (an org_admin: its organization's)", setup: idpList},
			{name: "show", args: []string{"ID"}, summary: "show one identity provider and the addresses to register at the upstream", setup: idpShow},
			{name: "update", args: []string{"ID"}, synopsis: "[the flags of create]", summary: "change an identity provider (the client secret is kept unless given)",
				details: "Only the flags given are sent. --scope and --email-domain replace the whole\n" +
					"list (--email-domain= empties it). --membership-org, --groups-claim and\n" +
					"--group-org replace the memberships together: give every one you keep.\n" +
					"--org= makes it the site's provider. --enabled=false stops sign-ins through\n" +
					"it and keeps its links.",
				setup: idpUpdate},
			{name: "delete", args: []string{"ID"}, summary: "delete an identity provider: its links go and every session opened through it ends",
				details: "Nobody signs in through it any more. Every session opened through it ends at\n" +
					"once, and the apps get back-channel logout tokens. The people it created stay,\n" +
					"with any other way in they have.",
				setup: deleteOne("/identity-providers", "identity provider")},
		}}
}
