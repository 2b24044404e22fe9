package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/internal/i18n"
)

// noun is a group of verbs: `org`, `user`, ...
type noun struct {
	name    string
	aliases []string
	summary string
	verbs   []verb
	// bare marks a noun that is itself the command (`oidcd admin status`):
	// it has exactly one verb, named "".
	bare bool
}

// verb is one subcommand; it maps to exactly one admin API call.
type verb struct {
	name     string
	args     []string // positional arguments, by name
	synopsis string   // flags, for usage lines
	summary  string   // one line
	details  string   // more help, shown by -h
	// transfer marks a verb that moves a whole file (snapshot save and
	// restore): --timeout defaults to DefaultTransferTimeout for it.
	transfer bool
	// noToken marks a verb that sends no admin token (login, logout).
	noToken bool
	// setup registers the verb's flags on fs and returns the function that
	// turns the parsed command line into a request, or a usage error.
	setup func(fs *flag.FlagSet) func(in *inv) (*request, error)
}

// inv is one parsed invocation of a verb.
type inv struct {
	args  []string
	set   map[string]bool // flags given on the command line, by name
	stdin io.Reader
	env   func(string) string
}

func (in *inv) given(name string) bool { return in.set[name] }

// request is the single admin API call of an invocation and how to show
// its answer.
type request struct {
	method string
	path   string // under APIPrefix, already escaped
	query  url.Values
	body   any // marshalled to JSON; nil sends no body
	// show prints a successful answer as text. body may be empty (204).
	show func(w io.Writer, body []byte) error
	// note, when set, returns a remark printed to stderr after a successful
	// answer in both output modes (secrets shown only once).
	note func(body []byte) string
	// upload, when set, is a file sent as the body
	// (application/octet-stream) instead of a JSON body.
	upload string
	// download, when set, is where the body of a successful answer is
	// saved (atomically, mode 0600) instead of being shown.
	download string
	// verdict, when set, turns a successful answer into the exit code (in
	// both output modes): `status` exits ExitNoLeader without a leader.
	verdict func(body []byte) int
	// run, when set, is a verb of several calls (audit tail and verify):
	// it makes them on c and returns the exit code.
	run func(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int
}

func findNoun(name string) *noun {
	for _, n := range commands() {
		if n.name == name {
			return &n
		}
		for _, a := range n.aliases {
			if a == name {
				return &n
			}
		}
	}
	return nil
}

func (n *noun) findVerb(name string) *verb {
	for i := range n.verbs {
		if n.verbs[i].name == name {
			return &n.verbs[i]
		}
	}
	return nil
}

// commands is the whole command tree, in the order of the usage text.
func commands() []noun {
	return []noun{
		{name: "status", summary: "the cluster at a glance", bare: true, verbs: []verb{
			{name: "", summary: "show the node, leader, members, applied index, signing keys and pending back-channel deliveries",
				details: "Every part is read by the node that answers (--addr), without a write, so a\n" +
					"node that has lost its leader still answers. The exit code is 0 when that\n" +
					"node knows a leader and 5 when it does not, so a script can wait for a\n" +
					"cluster to form:\n\n" +
					"  until oidcd admin status >/dev/null; do sleep 1; done\n\n" +
					"Each member shows the version it runs and the newest state format it\n" +
					"applies. While they differ (a rolling upgrade), a note says so, with the\n" +
					"format the cluster runs and which writes wait for which nodes.",
				setup: statusShow},
		}},
		{name: "login", summary: "sign in as a person, through the provider, and keep the token for --addr", bare: true, verbs: []verb{
			{name: "", synopsis: "[--issuer URL] [--wait D] [--port N]", noToken: true, setup: loginCmd,
				summary: "sign in as a person, through the provider, and keep the token for --addr",
				details: "Prints an address to open in a browser, where you sign in to the provider\n" +
					"with your second factor (the built-in application oidcd-admin, code flow\n" +
					"with PKCE), then waits on a loopback port (http://127.0.0.1:PORT/callback)\n" +
					"for the browser to come back. The access token is kept, for this --addr,\n" +
					"in $XDG_CONFIG_HOME/oidcd/credentials.json (~/.config/oidcd/ by default;\n" +
					"the directory mode 0700, the file 0600), and every later command to the\n" +
					"same --addr sends it, unless --token, --token-file or $" + EnvToken + "\n" +
					"gives another. It works while your sign-in does: until it expires (an\n" +
					"hour at most), you sign out, or your administrator grant is removed.\n\n" +
					"The endpoints are read from --addr's /.well-known/openid-configuration;\n" +
					"when --addr is a separate admin listener (--admin-addr), which serves no\n" +
					"discovery document, give --issuer with the provider's public address."},
		}},
		{name: "logout", summary: "revoke and forget the token login kept for --addr", bare: true, verbs: []verb{
			{name: "", noToken: true, setup: logoutCmd, summary: "revoke and forget the token login kept for --addr",
				details: "The token is revoked at the provider's revocation endpoint, then removed\n" +
					"from the credentials file. When the provider cannot be reached it is\n" +
					"removed all the same, with a warning: it then works until it expires."},
		}},
		{name: "admins", aliases: []string{"grant", "grants"}, summary: "administrator grants: the people who administer the site, and their role", verbs: []verb{
			{name: "list", synopsis: "[--page N] [--page-size N]", summary: "list grants, with each person's address", setup: grantList},
			{name: "create", synopsis: "--user U --role admin|org_admin|auditor [--org O]", summary: "let a person administer the site", setup: grantCreate,
				details: "--user is the person's email address (looked up first) or user ID.\n" +
					"admin may do everything; org_admin (with --org) reads and changes one\n" +
					"organization, its memberships and clients, and the people who belong to it\n" +
					"alone; auditor reads everything and writes nothing. The person signs in\n" +
					"with \"oidcd admin login\" or the console's Sign in."},
			{name: "delete", args: []string{"ID"}, summary: "remove a grant; it stops working at once on every node", setup: deleteOne("/admins", "grant")},
		}},
		{name: "api-keys", aliases: []string{"api-key", "apikey", "apikeys"}, summary: "API keys for automation, each with a role and an expiry", verbs: []verb{
			{name: "list", synopsis: "[--page N] [--page-size N]", summary: "list API keys (never the keys themselves)", setup: listOf("/api-keys", apiKeyTable)},
			{name: "create", synopsis: "--name N --role admin|org_admin|auditor [--org O] --expires-in D", summary: "make an API key; the key is printed this once", setup: apiKeyCreate,
				details: "--expires-in is a duration such as 720h, at most a year (8760h). The key is\n" +
					"shown only in this answer and stored hashed: keep it now. Send it as the\n" +
					"token (--token-file is best)."},
			{name: "delete", args: []string{"ID"}, summary: "delete an API key; it stops working at once on every node", setup: deleteOne("/api-keys", "API key")},
		}},
		{name: "admin-token", summary: "the break-glass admin token", verbs: []verb{
			{name: "rotate", summary: "replace the admin token; the new one is printed this once and the old one stops working at once", setup: adminTokenRotate},
		}},
		{name: "org", aliases: []string{"orgs", "organization", "organizations"}, summary: "organizations (tenants) that own clients and have members", verbs: []verb{
			{name: "create", synopsis: "--slug S --name N", summary: "create an organization", setup: orgCreate},
			{name: "list", synopsis: "[--page N] [--page-size N]", summary: "list organizations", setup: listOf("/organizations", orgTable)},
			{name: "get", args: []string{"ID"}, summary: "show one organization", setup: getOne("/organizations", orgTable)},
			{name: "update", args: []string{"ID"}, synopsis: "[--name N] [--registration on|off] [--email-domains D,D...] [--branding-display-name N] [--branding-logo FILE] [--branding-primary-color C] [--branding-support-url U] [--branding-support-email E]",
				summary: "rename an organization, set who may register themselves into it, or its branding",
				details: "--registration on lets people whose address is in one of --email-domains\n" +
					"register themselves from the sign-in page of the organization's apps (when\n" +
					"the provider sends mail: --smtp-url or --email-outbox). --email-domains\n" +
					"replaces the list (at most 100; internationalized names are kept in punycode;\n" +
					"--email-domains= empties it); a flag not given keeps its value. Turning\n" +
					"registration on needs at least one domain. The --branding- flags set the\n" +
					"organization's own branding as branding set does the site's (an empty value\n" +
					"clears a field; with every field empty its pages show the site's).",
				setup: orgUpdate},
			{name: "delete", args: []string{"ID"}, summary: "delete an organization",
				details: "The organization becomes \"deleted\": its app sessions end and back-channel\nlogout tokens go out to its clients.",
				setup:   deleteOne("/organizations", "organization")},
		}},
		{name: "branding", summary: "the site's default name, logo, colour and support contacts of the sign-in pages", verbs: []verb{
			{name: "get", summary: "show the site's branding", setup: brandingGet},
			{name: "set", synopsis: "[--display-name N] [--logo FILE] [--primary-color #rrggbb] [--support-url URL] [--support-email E]",
				summary: "set the site's branding; a flag not given keeps its value, an empty one clears it",
				details: "--logo reads a PNG or an SVG file (at most 64 KiB) and sends it as a data: URI.\n" +
					"The server refuses an SVG with scripts, event handlers, foreignObject or outside\n" +
					"references, and a --primary-color on which white text falls below a 4.5:1\n" +
					"contrast ratio. An organization's own branding: org update --branding-...",
				setup: brandingSet},
		}},
		{name: "user", aliases: []string{"users"}, summary: "people who sign in, named by their email address or user ID (the `sub` of their tokens)", verbs: []verb{
			{name: "create", synopsis: "--email E [--email-verified] [--password-stdin | --password P] [--phone P]", summary: "create a user", setup: userCreate,
				details: "Prefer --password-stdin: a --password value is visible to other local users\nin the process list and lands in shell history. With --password-stdin the\npassword is read from standard input, up to the end or a trailing newline."},
			{name: "list", synopsis: "[--email E] [--page N] [--page-size N]", summary: "list users, all or the one with an address", setup: userList},
			{name: "import", args: []string{"FILE"}, synopsis: "[--format json|jsonl|csv] [--batch N] [--progress-file F] [--restart]",
				summary: "import people, with their password hashes, from another provider",
				details: "FILE holds people as POST /admin/v1/users/import takes them: a JSON array (or\n" +
					"{\"users\": [...]}), JSON lines, or CSV with a header naming the columns email,\n" +
					"email_verified, phone, password_hash and organizations (ids separated by \";\").\n" +
					"password_hash is argon2id, bcrypt ($2a$, $2b$, $2y$) or PBKDF2-SHA256/512 (PHC\n" +
					"or passlib form); the first sign-in replaces it with the node's argon2id.\n" +
					"The file is read once to check it, then sent in batches of --batch people,\n" +
					"each one replicated write, with a progress line. FILE.progress records the\n" +
					"rows the server acknowledged: run the same command again after an\n" +
					"interruption and it resumes there. People already present (by address)\n" +
					"are left as they are and counted as already there. A person the server\n" +
					"refuses is printed with their row; the exit code is then 1.",
				setup: userImport},
			{name: "get", args: personArgs, summary: "show one user, by address or ID", setup: personCall(userGet),
				details: personHelp},
			{name: "update", args: personArgs, synopsis: "[--email E] [--email-verified=true|false] [--password-stdin | --password P] [--phone P]", summary: "change a user",
				details: "Only the flags given are sent; the other fields keep their values.\n\n" + personHelp,
				setup:   aboutPerson(userUpdate)},
			{name: "delete", args: personArgs, summary: "erase a user",
				details: "Account erasure: every session of the person ends and sub-only back-channel\nlogout tokens go out.\n\n" + personHelp,
				setup:   personCall(func(id string) *request { return deleteRequest("/users", "user", id) })},
			{name: "totp", args: personArgs, summary: "enrol an authenticator app; prints the secret and its otpauth:// URI",
				details: "The secret is base32, SHA1, 6 digits, 30 s. It is shown only this once.\n\n" + personHelp,
				setup:   personCall(userTOTP)},
			{name: "recovery-codes", args: personArgs, summary: "issue 10 single-use recovery codes, replacing earlier ones",
				details: "The codes are shown only this once; each works once; earlier codes stop working.\n\n" + personHelp,
				setup:   personCall(userRecoveryCodes)},
			{name: "totp-remove", args: personArgs, summary: "remove the user's authenticator app (a lost phone)",
				details: personHelp,
				setup:   personCall(userRemove("/totp", "authenticator app of user"))},
			{name: "factors", args: personArgs, summary: "show the user's second factors: authenticator app, recovery codes left, passkeys",
				details: personHelp,
				setup:   personCall(userFactors)},
			{name: "unlock", args: personArgs, summary: "clear the user's password and code lockouts",
				details: personHelp,
				setup:   personCall(userRemove("/lockouts", "lockouts of user"))},
			{name: "verify-email", args: personArgs, synopsis: "[--locale L]", summary: "send the user a link that proves their address (email_verified)",
				details: "A verify_email message goes to the user's current address with a link that\n" +
					"works once, for 24 hours; following it sets email_verified. The message is\n" +
					"in the language --locale names (" + strings.Join(i18n.Tags(), ", ") + "; default en). A newer link\n" +
					"voids older ones. A person of a directory is refused (their address is the\n" +
					"directory's), and so is every request while the provider sends no mail.\n\n" + personHelp,
				setup: aboutPerson(userVerifyEmail)},
			{name: "identities", args: personArgs, summary: "list the user's links to identity providers (their subject at each upstream)",
				details: personHelp,
				setup:   personCall(userIdentities)},
			{name: "unlink", args: []string{personArg, "IDENTITY_ID"}, summary: "remove one of the user's links; every session opened through it ends",
				details: "IDENTITY_ID is from user identities. The person no longer signs in through\n" +
					"that upstream subject; their sessions opened through it end at once and the\n" +
					"apps get back-channel logout tokens. It is done even when the link was the\n" +
					"person's only way in.\n\n" + personHelp,
				setup: aboutPerson(userUnlink)},
		}},
		{name: "lockout", aliases: []string{"lockouts"}, summary: "sign-in lockouts after too many failures (accounts, IP addresses, phone numbers)", verbs: []verb{
			{name: "list", summary: "list what is locked now and until when", setup: lockoutList},
			{name: "clear", args: []string{"KEY"}, summary: "clear one lockout before it ends by itself (KEY from lockout list)",
				setup: deleteOne("/lockouts", "lockout")},
		}},
		{name: "directory", aliases: []string{"directories"}, summary: "LDAP and Active Directory servers people sign in against", verbs: []verb{
			{name: "create", synopsis: "--name N --url U [--start-tls] [--ca-file F] [--insecure] --bind-dn DN (--bind-password-stdin | --bind-password P) --user-base DN --user-filter F --id-attribute A [--email-attribute A] [--phone-attribute A] [--group-base DN --group-filter F] [--org GROUP_DN=ORG_ID...] [--sync-interval D]",
				summary: "register a directory",
				details: "A person who types an address on the sign-in page that no local person has is\n" +
					"looked up with the search account (--user-filter, the address escaped) and\n" +
					"signed in by a bind as them over TLS. Their first sign-in creates them; their\n" +
					"sub comes from --id-attribute. Members of a --org group are members of that\n" +
					"organization. The leader re-reads the directory every --sync-interval: a\n" +
					"person disabled or removed there is signed out everywhere.",
				setup: directoryCreate},
			{name: "list", summary: "list directories and their last sync", setup: directoryList},
			{name: "get", args: []string{"ID"}, summary: "show one directory", setup: getOne("/directories", directoryTable)},
			{name: "update", args: []string{"ID"}, synopsis: "[the flags of create]", summary: "change a directory (the bind password is kept unless given)", setup: directoryUpdate},
			{name: "delete", args: []string{"ID"}, summary: "remove a directory (its people stay, and cannot sign in)",
				setup: deleteOne("/directories", "directory")},
		}},
		idpNoun(),
		{name: "invitation", aliases: []string{"invitations", "invite", "invites"}, summary: "invitations by email to join an organization", verbs: []verb{
			{name: "create", synopsis: "--email E --org O [--expires-in D] [--locale L]", summary: "invite an address; the message with its link goes out at once", setup: invitationCreate,
				details: "The link works once, until --expires-in has passed (from 1h to 720h, 30 days;\n" +
					"default 7 days): it asks a new person for a password, or lets a person who\n" +
					"has the address sign in, and makes them an active member of --org. The\n" +
					"message is in the language --locale names (" + strings.Join(i18n.Tags(), ", ") + "; default en).\n" +
					"The link itself is never shown. The provider must send mail (--smtp-url or\n" +
					"--email-outbox)."},
			{name: "list", synopsis: "[--org O] [--status pending|accepted|expired] [--page N] [--page-size N]", summary: "list invitations, newest first", setup: invitationList},
			{name: "get", args: []string{"ID"}, summary: "show one invitation", setup: getOne("/invitations", invitationTable)},
			{name: "delete", args: []string{"ID"}, summary: "withdraw an invitation; its link stops working at once on every node",
				setup: invitationDelete},
		}},
		{name: "membership", aliases: []string{"memberships"}, summary: "links between a user and an organization", verbs: []verb{
			{name: "create", synopsis: "--user U --org O [--status active|suspended]", summary: "add a user, by address or ID, to an organization", setup: membershipCreate,
				details: "--user is the person's email address (looked up first) or user ID."},
			{name: "list", synopsis: "[--user U] [--page N] [--page-size N]", summary: "list memberships, all or one user's (by address or ID)", setup: membershipList,
				details: "--user is the person's email address (looked up first) or user ID."},
			{name: "get", args: []string{"ID"}, summary: "show one membership", setup: getOne("/memberships", membershipTable)},
			{name: "update", args: []string{"ID"}, synopsis: "--status active|suspended", summary: "suspend or reactivate a membership", setup: membershipUpdate},
			{name: "delete", args: []string{"ID"}, summary: "remove a membership", setup: deleteOne("/memberships", "membership")},
		}},
		{name: "client", aliases: []string{"clients", "app", "apps"}, summary: "relying-party applications", verbs: []verb{
			{name: "create", synopsis: "--name N --org O --redirect-uri U... [--type public|confidential] [--scope S...] [--multi-org] [--serve-org O...] [--access-token-ttl N] [--backchannel-logout-uri U] [--skip-consent] [--suspended] [--rate-limit N/DURATION] [--application-type web|native] [--web-origins O,...|default] [--client-id ID]",
				summary: "register a client",
				details: "--redirect-uri, --scope and --serve-org may be repeated; --scope and\n--serve-org also take comma-separated lists. A confidential client (the\ndefault) gets a generated client_secret, shown only this once.\n\n" +
					"--rate-limit N/DURATION (600/60s) is the client's own limit on token,\n" +
					"introspection and revocation requests per client address, instead of the\n" +
					"server's --rate-limit (5/60s): a server-side app exchanges every sign-in's\n" +
					"code from its own address. It counts requests that prove the client's\n" +
					"secret; others keep the server's. Confidential clients only; N up to\n" +
					"10000, a duration from 1s to 24h; empty (--rate-limit=) goes back to the\n" +
					"server's.\n\n" +
					"--application-type native registers a desktop or mobile app (RFC 8252):\n" +
					"public (--type public), it may also register a private-use scheme redirect\n" +
					"(com.example.app:/callback, the scheme holding a dot) and a loopback one\n" +
					"(http://127.0.0.1/callback or http://[::1]/callback) that matches on any port.\n\n" +
					"--web-origins lists the browser origins (https://app.example) whose pages may\n" +
					"call the token endpoint, userinfo and memberships (CORS); a public client only.\n" +
					"Without it a public client gets the origins of its https and loopback\n" +
					"redirect URIs, and a confidential one none; --web-origins= (empty) allows\n" +
					"none, --web-origins default goes back to the default.",
				setup: clientCreate},
			{name: "get", args: []string{"ID"}, summary: "show one client", setup: getOne("/clients", clientView)},
			{name: "list", synopsis: "[--page N] [--page-size N]", summary: "list clients", setup: listOf("/clients", clientTable)},
			{name: "update", args: []string{"ID"}, synopsis: "[flags of create, except --client-id and --type]", summary: "change a client",
				details: "Only the flags given are sent. A list flag replaces the whole list;\ngive it empty (--serve-org=) to send an empty list. The client ID and the\ntype cannot change. --rate-limit= (empty) goes back to the server's limit;\n--web-origins default goes back to the default origins, --web-origins= allows none.",
				setup:   clientUpdate},
			{name: "delete", args: []string{"ID"}, summary: "delete a client", setup: deleteOne("/clients", "client")},
		}},
		{name: "keys", aliases: []string{"key"}, summary: "token signing keys", verbs: []verb{
			{name: "list", summary: "list signing keys and their states (next, active, retired)", setup: keysList},
			{name: "rotate", synopsis: "[--immediate]", summary: "make a new signing key",
				details: "Without --immediate the new key is published at once and signs once the\nJWKS cache lifetime has passed (state \"next\"). With --immediate (an\nemergency, e.g. a leaked key) it signs at once (state \"active\").",
				setup:   keysRotate},
		}},
		{name: "cluster", summary: "the raft cluster", verbs: []verb{
			{name: "status", summary: "show the leader, the members with their versions, and the state format", setup: clusterStatus},
			{name: "remove-node", args: []string{"ID"}, summary: "remove a dead node from the raft configuration (run against any node)",
				setup: deleteOne("/cluster/nodes", "node")},
			{name: "promote", args: []string{"ID"}, summary: "make a member a voter (run against any node)", setup: setVoter("promote"),
				details: "An edge replica (started with --non-voter) becomes a voter: it votes,\n" +
					"may lead and counts towards the quorum. The role stands across restarts."},
			{name: "demote", args: []string{"ID"}, summary: "make a member a non-voter, an edge replica (run against any node)", setup: setVoter("demote"),
				details: "The member keeps applying the log and serving, but no longer votes or\n" +
					"counts towards the quorum. The leader is not demoted: move leadership first."},
		}},
		{name: "audit", summary: "the replicated, hash-chained audit trail", verbs: []verb{
			{name: "list", synopsis: "[--after SEQ] [--limit N] [--type T] [--subject SUB] [--client ID] [--org ID]", summary: "list events in seq order", setup: auditList},
			{name: "tail", synopsis: "[--after SEQ] [--follow] [--type T] [--subject SUB] [--client ID] [--org ID]", summary: "print events as JSON lines, for a log shipper",
				details: "Prints every event after --after, one JSON object a line. With --follow\n" +
					"it then waits for new events (a long poll) until interrupted. A shipper\n" +
					"that restarts passes the seq of the last line it stored as --after: no\n" +
					"event is lost or printed twice. A gap in seq means events were pruned\n" +
					"(--audit-retention) before they were read.",
				setup: auditTail},
			{name: "verify", synopsis: "[--nodes URL,URL...]", summary: "verify the hash chain on every node and compare the nodes",
				details: "Each node recomputes its chain (GET /admin/v1/audit/verify); the nodes are\n" +
					"then compared at the newest seq they all hold, so one node's altered\n" +
					"state file shows up. The nodes are the members of cluster status at their\n" +
					"http_addr; with --admin-addr, name their admin URLs with --nodes. Exits 1\n" +
					"when a node's chain is broken, a node cannot be asked, or nodes differ.",
				setup: auditVerify},
		}},
		{name: "snapshot", aliases: []string{"snapshots"}, summary: "backups of the whole cluster state", verbs: []verb{
			{name: "save", args: []string{"FILE"}, summary: "save a backup of the cluster state to FILE", transfer: true, setup: snapshotSave,
				details: "Any node will do: the copy includes every write acknowledged before the\n" +
					"call. FILE is written whole or not at all (a temporary file next to it is\n" +
					"renamed into place), mode 0600. The backup holds every secret of the\n" +
					"cluster, the admin token hash and the signing keys among them: keep it\n" +
					"where the admin token would be kept.\n\n" +
					"--timeout covers the whole download; its default is 10m here."},
			{name: "restore", args: []string{"FILE"}, summary: "replace the state of the whole cluster with the backup in FILE", transfer: true, setup: snapshotRestore,
				details: "Run it against the leader; another node answers with the leader's address.\n" +
					"FILE must come from \"snapshot save\" of this version; the server checks it\n" +
					"before anything changes. Every node then takes the backup's state: writes\n" +
					"made after the backup was saved are gone.\n\n" +
					"The backup brings back its own admin token: afterwards the token that works,\n" +
					"on every node and at once, is the one that worked when the backup was saved,\n" +
					"whether it came from --admin-token, OIDCD_ADMIN_TOKEN or <data-dir>/admin-token.\n" +
					"Tokens the nodes had before no longer work: a node started with another\n" +
					"--admin-token says so in its log and keeps the backup's, and so does a node\n" +
					"whose token file holds another token. A backup saved by v0.1.0 from nodes run\n" +
					"with --admin-token holds no token: the leader then takes its own --admin-token,\n" +
					"or generates one, prints it and writes it to its <data-dir>/admin-token.\n" +
					"Signing keys and sessions are the backup's too.\n\n" +
					"--timeout covers the whole upload; its default is 10m here."},
		}},
	}
}

// errUsage builds the usage errors returned by the setup functions.
func errUsage(format string, a ...any) error { return fmt.Errorf(format, a...) }

// required reports the first empty value among name/value pairs.
func required(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			return errUsage("--%s is required", pairs[i])
		}
	}
	return nil
}

func idPath(prefix, id string) string { return prefix + "/" + url.PathEscape(id) }

// ---- generic verbs

func pageFlags(fs *flag.FlagSet) func(in *inv) (url.Values, error) {
	page := fs.Int("page", 0, "page `number`, from 1 (default: the server's)")
	size := fs.Int("page-size", 0, "items per page, `N` (default: the server's)")
	return func(in *inv) (url.Values, error) {
		q := url.Values{}
		if in.given("page") {
			if *page < 1 {
				return nil, errUsage("--page must be 1 or more")
			}
			q.Set("page", strconv.Itoa(*page))
		}
		if in.given("page-size") {
			if *size < 1 {
				return nil, errUsage("--page-size must be 1 or more")
			}
			q.Set("page_size", strconv.Itoa(*size))
		}
		return q, nil
	}
}

func listOf(path string, v view) func(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(fs *flag.FlagSet) func(in *inv) (*request, error) {
		pages := pageFlags(fs)
		return func(in *inv) (*request, error) {
			q, err := pages(in)
			if err != nil {
				return nil, err
			}
			return &request{method: http.MethodGet, path: path, query: q, show: v.list}, nil
		}
	}
}

func getOne(path string, v view) func(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(fs *flag.FlagSet) func(in *inv) (*request, error) {
		return func(in *inv) (*request, error) {
			return &request{method: http.MethodGet, path: idPath(path, in.args[0]), show: v.one}, nil
		}
	}
}

func deleteOne(path, what string) func(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(fs *flag.FlagSet) func(in *inv) (*request, error) {
		return func(in *inv) (*request, error) {
			return deleteRequest(path, what, in.args[0]), nil
		}
	}
}

// deleteRequest is the DELETE of the record path/id, a what.
func deleteRequest(path, what, id string) *request {
	return &request{method: http.MethodDelete, path: idPath(path, id), show: func(w io.Writer, _ []byte) error {
		_, err := fmt.Fprintf(w, "deleted %s %s\n", what, clean(id))
		return err
	}}
}

// ---- administrators, API keys, the break-glass token

// roles are the roles of grants and API keys.
var roles = []string{"admin", "org_admin", "auditor"}

// roleBody checks --role and --org and returns the body's fields.
func roleBody(role, org string, in *inv) (map[string]any, error) {
	if err := checkEnum("role", role, roles); err != nil {
		return nil, err
	}
	b := map[string]any{"role": role}
	switch {
	case role == "org_admin" && strings.TrimSpace(org) == "":
		return nil, errUsage("--role org_admin needs --org")
	case role != "org_admin" && in.given("org"):
		return nil, errUsage("--org is for --role org_admin")
	case in.given("org"):
		b["organization_id"] = org
	}
	return b, nil
}

// maxKeyLifetime is the longest --expires-in the server takes.
const maxKeyLifetime = 365 * 24 * time.Hour

func apiKeyCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	name := fs.String("name", "", "what the key is for, a `name` (required)")
	role := fs.String("role", "", "`role`: admin, org_admin or auditor (required)")
	org := fs.String("org", "", "organization `ID` of an org_admin key")
	expires := fs.Duration("expires-in", 0, "lifetime, a `duration` such as 720h, at most 8760h (required)")
	return func(in *inv) (*request, error) {
		if err := required("name", *name, "role", *role); err != nil {
			return nil, err
		}
		if !in.given("expires-in") {
			return nil, errUsage("--expires-in is required")
		}
		if *expires < time.Second || *expires > maxKeyLifetime {
			return nil, errUsage("--expires-in must be from 1s to 8760h (a year)")
		}
		b, err := roleBody(*role, *org, in)
		if err != nil {
			return nil, err
		}
		b["name"] = *name
		b["expires_in"] = int64(*expires / time.Second)
		return &request{method: http.MethodPost, path: "/api-keys", body: b, show: apiKeyView.one,
			note: func([]byte) string { return "the key is shown only this once: store it now" }}, nil
	}
}

func adminTokenRotate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodPost, path: "/admin-token", show: func(w io.Writer, body []byte) error {
			var t struct {
				Token string `json:"token"`
			}
			if err := decode(body, &t); err != nil {
				return err
			}
			if t.Token == "" {
				return errors.New("the answer holds no token")
			}
			_, err := fmt.Fprintln(w, t.Token)
			return err
		}, note: func([]byte) string {
			return "the new admin token is shown only this once, and the old one no longer works: store it now (a --token-file or <data-dir>/admin-token holding the old one needs it too)"
		}}, nil
	}
}

// ---- organizations

func orgCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	slug := fs.String("slug", "", "short unique `name` used in URLs (required)")
	name := fs.String("name", "", "display `name` (required)")
	return func(in *inv) (*request, error) {
		if err := required("slug", *slug, "name", *name); err != nil {
			return nil, err
		}
		return &request{method: http.MethodPost, path: "/organizations",
			body: map[string]any{"slug": *slug, "name": *name}, show: orgTable.one}, nil
	}
}

// ---- users

// userList is user list [--email E].
func userList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	pages := pageFlags(fs)
	email := fs.String("email", "", "only the person with this address (any case)")
	return func(in *inv) (*request, error) {
		q, err := pages(in)
		if err != nil {
			return nil, err
		}
		if in.given("email") {
			q.Set("email", *email)
		}
		return &request{method: http.MethodGet, path: "/users", query: q, show: userTable.list}, nil
	}
}

// userFlags are the flags of user create and update.
type userFlags struct {
	email, password, phone string
	verified, pwStdin      bool
}

func (u *userFlags) register(fs *flag.FlagSet, create bool) {
	req := ""
	if create {
		req = " (required)"
	}
	fs.StringVar(&u.email, "email", "", "email `address`"+req)
	fs.BoolVar(&u.verified, "email-verified", false, "mark the email address as verified (=false to unmark)")
	fs.StringVar(&u.password, "password", "", "`password` (visible in the process list; prefer --password-stdin)")
	fs.BoolVar(&u.pwStdin, "password-stdin", false, "read the password from standard input")
	fs.StringVar(&u.phone, "phone", "", "phone `number` in E.164 form, e.g. +15551234567, for text-message sign-in")
}

// body returns the fields whose flags were given.
func (u *userFlags) body(in *inv) (map[string]any, error) {
	b := map[string]any{}
	if in.given("email") {
		b["email"] = u.email
	}
	if in.given("email-verified") {
		b["email_verified"] = u.verified
	}
	if in.given("phone") {
		b["phone"] = u.phone
	}
	switch {
	case in.given("password") && u.pwStdin:
		return nil, errUsage("give --password or --password-stdin, not both")
	case in.given("password"):
		if u.password == "" {
			return nil, errUsage("--password is empty")
		}
		b["password"] = u.password
	case u.pwStdin:
		pw, err := readPassword(in.stdin)
		if err != nil {
			return nil, err
		}
		b["password"] = pw
	}
	return b, nil
}

// readPassword reads the whole of r, without its trailing line break.
func readPassword(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return "", errUsage("--password-stdin: %v", err)
	}
	pw := strings.TrimSuffix(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", errUsage("--password-stdin: standard input is empty")
	}
	return pw, nil
}

func userCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var u userFlags
	u.register(fs, true)
	return func(in *inv) (*request, error) {
		if err := required("email", u.email); err != nil {
			return nil, err
		}
		b, err := u.body(in)
		if err != nil {
			return nil, err
		}
		return &request{method: http.MethodPost, path: "/users", body: b, show: userTable.one}, nil
	}
}

// personHelp is the help of the verbs whose argument is a person.
const personHelp = "ADDRESS|ID is the person's email address (looked up first) or user ID."

func userGet(id string) *request {
	return &request{method: http.MethodGet, path: idPath("/users", id), show: userTable.one}
}

func userUpdate(fs *flag.FlagSet) func(in *inv) (func(id string) *request, error) {
	var u userFlags
	u.register(fs, false)
	return func(in *inv) (func(id string) *request, error) {
		b, err := u.body(in)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, errUsage("nothing to update: give at least one of --email, --email-verified, --password, --password-stdin, --phone")
		}
		return func(id string) *request {
			return &request{method: http.MethodPatch, path: idPath("/users", id), body: b, show: userTable.one}
		}, nil
	}
}

func userTOTP(id string) *request {
	return &request{method: http.MethodPost, path: idPath("/users", id) + "/totp", body: struct{}{},
		show: showTOTP,
		note: func([]byte) string {
			return "the TOTP secret is shown only this once: add it to the authenticator app now"
		}}
}

func userRecoveryCodes(id string) *request {
	return &request{method: http.MethodPost, path: idPath("/users", id) + "/recovery-codes", body: struct{}{},
		show: showCodes,
		note: func([]byte) string {
			return "these recovery codes are shown only this once and replace any earlier ones; each works once"
		}}
}

// userRemove is the DELETE of a person's sub-resource, /users/ID+suffix,
// a what.
func userRemove(suffix, what string) func(id string) *request {
	return func(id string) *request {
		return &request{method: http.MethodDelete, path: idPath("/users", id) + suffix, show: func(w io.Writer, _ []byte) error {
			_, err := fmt.Fprintf(w, "removed %s %s\n", what, clean(id))
			return err
		}}
	}
}

func userFactors(id string) *request {
	return &request{method: http.MethodGet, path: idPath("/users", id) + "/factors", show: showFactors}
}

// ---- memberships

var membershipStatuses = []string{"active", "suspended"}

func checkEnum(flagName, v string, allowed []string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return errUsage("--%s must be one of %s, got %q", flagName, strings.Join(allowed, ", "), v)
}

func membershipCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	user := fs.String("user", "", personFlagUsage+" (required)")
	org := fs.String("org", "", "organization `ID` (required)")
	status := fs.String("status", "", "`status`: active or suspended (default: the server's, active)")
	return func(in *inv) (*request, error) {
		if err := required("user", *user, "org", *org); err != nil {
			return nil, err
		}
		who, err := personName("--user", *user)
		if err != nil {
			return nil, err
		}
		b := map[string]any{"org_id": *org}
		if in.given("status") {
			if err := checkEnum("status", *status, membershipStatuses); err != nil {
				return nil, err
			}
			b["status"] = *status
		}
		return forPerson(who, func(id string) *request {
			b["user_id"] = id
			return &request{method: http.MethodPost, path: "/memberships", body: b, show: membershipTable.one}
		}), nil
	}
}

func membershipList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	user := fs.String("user", "", "only the memberships of this person: their email `address` or user ID")
	pages := pageFlags(fs)
	return func(in *inv) (*request, error) {
		q, err := pages(in)
		if err != nil {
			return nil, err
		}
		if !in.given("user") {
			return &request{method: http.MethodGet, path: "/memberships", query: q, show: membershipTable.list}, nil
		}
		who, err := personName("--user", *user)
		if err != nil {
			return nil, err
		}
		return forPerson(who, func(id string) *request {
			q.Set("user_id", id)
			return &request{method: http.MethodGet, path: "/memberships", query: q, show: membershipTable.list}
		}), nil
	}
}

func membershipUpdate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	status := fs.String("status", "", "new `status`: active or suspended (required)")
	return func(in *inv) (*request, error) {
		if err := required("status", *status); err != nil {
			return nil, err
		}
		if err := checkEnum("status", *status, membershipStatuses); err != nil {
			return nil, err
		}
		return &request{method: http.MethodPatch, path: idPath("/memberships", in.args[0]),
			body: map[string]any{"status": *status}, show: membershipTable.one}, nil
	}
}

// ---- clients

// clientFlags are the flags of client create and update.
type clientFlags struct {
	name, org, typ, backchannel, clientID string
	rateLimit, appType                    string
	redirects, scopes, serveOrgs, origins listFlag
	multiOrg, skipConsent, suspended      bool
	ttl                                   secondsFlag
}

func (c *clientFlags) register(fs *flag.FlagSet, create bool) {
	req := ""
	if create {
		req = " (required)"
	}
	c.scopes.split, c.serveOrgs.split, c.origins.split = true, true, true
	fs.StringVar(&c.name, "name", "", "`name` shown on sign-in and consent pages"+req)
	fs.StringVar(&c.org, "org", "", "owning organization `ID`"+req)
	fs.Var(&c.redirects, "redirect-uri", "redirect `URI`, matched exactly; repeat for several"+req)
	if create {
		fs.StringVar(&c.typ, "type", "", "client `type`: confidential (gets a secret) or public (default: the server's, confidential)")
	}
	fs.Var(&c.scopes, "scope", "allowed `scope`s among openid, email, profile; repeat or comma-separate (default: the server's, openid)")
	fs.BoolVar(&c.multiOrg, "multi-org", false, "the app serves several organizations")
	fs.Var(&c.serveOrgs, "serve-org", "for a --multi-org app, an organization `ID` it serves; repeat or comma-separate (none = every organization)")
	fs.Var(&c.ttl, "access-token-ttl", "access- and ID-token lifetime in `seconds` or as a duration like 15m (default: the server's, 600)")
	fs.StringVar(&c.backchannel, "backchannel-logout-uri", "", "`URI` to which back-channel logout tokens are POSTed")
	fs.BoolVar(&c.skipConsent, "skip-consent", false, "first-party app: no consent page")
	fs.BoolVar(&c.suspended, "suspended", false, "the client is suspended")
	fs.StringVar(&c.rateLimit, "rate-limit", "", "the client's own limit of token, introspection and revocation requests per client address, as `N/DURATION` like 600/60s; empty: the server's --rate-limit (5/60s)")
	fs.StringVar(&c.appType, "application-type", "", "`web` (the server's default) or native: a desktop or mobile app, public, that may also register private-use scheme (com.example.app:/callback) and any-port loopback (http://127.0.0.1/callback) redirect URIs")
	fs.Var(&c.origins, "web-origins", "browser `origins` (https://app.example) that may call the token endpoint, userinfo and memberships from script; comma-separate or repeat; empty (--web-origins=) for none, \"default\" for the default: a public client's redirect URIs' origins")
	if create {
		fs.StringVar(&c.clientID, "client-id", "", "chosen client `ID`, of the characters A-Z a-z 0-9 . _ - (default: a generated UUID)")
	}
}

// body returns the fields whose flags were given.
func (c *clientFlags) body(in *inv) (map[string]any, error) {
	b := map[string]any{}
	str := map[string]struct {
		key string
		v   string
	}{
		"client-id":              {"client_id", c.clientID},
		"name":                   {"name", c.name},
		"org":                    {"organization_id", c.org},
		"type":                   {"type", c.typ},
		"backchannel-logout-uri": {"backchannel_logout_uri", c.backchannel},
		"rate-limit":             {"rate_limit", c.rateLimit},
	}
	for flagName, f := range str {
		if in.given(flagName) {
			b[f.key] = f.v
		}
	}
	if in.given("type") {
		if err := checkEnum("type", c.typ, []string{"confidential", "public"}); err != nil {
			return nil, err
		}
	}
	if in.given("application-type") {
		if err := checkEnum("application-type", c.appType, []string{"web", "native"}); err != nil {
			return nil, err
		}
		b["application_type"] = c.appType
	}
	if in.given("web-origins") {
		o, err := c.origins.originsValue()
		if err != nil {
			return nil, err
		}
		b["web_origins"] = o
	}
	lists := map[string]struct {
		key string
		v   *listFlag
	}{
		"redirect-uri": {"redirect_uris", &c.redirects},
		"scope":        {"scopes", &c.scopes},
		"serve-org":    {"organizations", &c.serveOrgs},
	}
	for flagName, f := range lists {
		if in.given(flagName) {
			b[f.key] = f.v.list()
		}
	}
	bools := map[string]struct {
		key string
		v   bool
	}{
		"multi-org":    {"multi_organization", c.multiOrg},
		"skip-consent": {"skip_consent", c.skipConsent},
		"suspended":    {"suspended", c.suspended},
	}
	for flagName, f := range bools {
		if in.given(flagName) {
			b[f.key] = f.v
		}
	}
	if in.given("access-token-ttl") {
		b["access_token_ttl"] = c.ttl.n
	}
	return b, nil
}

func clientCreate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var c clientFlags
	c.register(fs, true)
	return func(in *inv) (*request, error) {
		if err := required("name", c.name, "org", c.org); err != nil {
			return nil, err
		}
		if len(c.redirects.vals) == 0 {
			return nil, errUsage("--redirect-uri is required")
		}
		b, err := c.body(in)
		if err != nil {
			return nil, err
		}
		return &request{method: http.MethodPost, path: "/clients", body: b, show: clientView.one, note: secretNote}, nil
	}
}

func clientUpdate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	var c clientFlags
	c.register(fs, false)
	return func(in *inv) (*request, error) {
		b, err := c.body(in)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, errUsage("nothing to update: give at least one flag (see -h)")
		}
		return &request{method: http.MethodPatch, path: idPath("/clients", in.args[0]), body: b, show: clientView.one, note: secretNote}, nil
	}
}

// secretNote warns that a client_secret in the answer will not be shown again.
func secretNote(body []byte) string {
	obj, err := decodeObject(body)
	if err != nil {
		return ""
	}
	if s, _ := obj["client_secret"].(string); s == "" {
		return ""
	}
	return "the client secret is shown only this once: store it now"
}

// ---- keys and cluster

func keysList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: "/keys", show: keyTable.list}, nil
	}
}

func keysRotate(fs *flag.FlagSet) func(in *inv) (*request, error) {
	immediate := fs.Bool("immediate", false, "sign with the new key at once (emergency rotation)")
	return func(in *inv) (*request, error) {
		b := map[string]any{}
		if in.given("immediate") {
			b["immediate"] = *immediate
		}
		return &request{method: http.MethodPost, path: "/keys/rotate", body: b, show: keyTable.one}, nil
	}
}

// setVoter is cluster promote and demote.
func setVoter(verb string) func(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(fs *flag.FlagSet) func(in *inv) (*request, error) {
		return func(in *inv) (*request, error) {
			id := in.args[0]
			return &request{method: http.MethodPost, path: idPath("/cluster/members", id) + "/" + verb, show: func(w io.Writer, _ []byte) error {
				_, err := fmt.Fprintf(w, "%sd %s\n", verb, clean(id))
				return err
			}}, nil
		}
	}
}

func clusterStatus(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: "/cluster", show: showCluster}, nil
	}
}

// ---- flag values

// listFlag is a repeatable string flag. An empty value marks the flag as
// given without adding to it, so `--serve-org=` sends an empty list.
type listFlag struct {
	vals  []string
	split bool // also split each value on commas and spaces
}

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.vals, ",")
}

func (l *listFlag) Set(v string) error {
	if !l.split {
		if v != "" {
			l.vals = append(l.vals, v)
		}
		return nil
	}
	l.vals = append(l.vals, strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })...)
	return nil
}

// originsValue is --web-origins as the API's web_origins: "default"
// alone is null (the default, which follows the redirect URIs), nothing
// is [] (none), else the list.
func (l *listFlag) originsValue() (any, error) {
	if slices.Contains(l.vals, "default") {
		if len(l.vals) != 1 {
			return nil, errUsage("--web-origins default stands alone: it means the default origins, which follow the redirect URIs")
		}
		return nil, nil
	}
	return l.list(), nil
}

func (l *listFlag) list() []string {
	if l.vals == nil {
		return []string{}
	}
	return l.vals
}

// secondsFlag is a positive whole number of seconds, given as a number or
// as a Go duration ("15m").
type secondsFlag struct{ n int64 }

func (s *secondsFlag) String() string {
	if s == nil || s.n == 0 {
		return ""
	}
	return strconv.FormatInt(s.n, 10)
}

func (s *secondsFlag) Set(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return errors.New("must be positive")
		}
		s.n = n
		return nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return err
	}
	s.n = d
	return nil
}

func parseDuration(v string) (int64, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("want a number of seconds or a duration like 15m")
	}
	if d < time.Second || d%time.Second != 0 {
		return 0, errors.New("must be a positive whole number of seconds")
	}
	return int64(d / time.Second), nil
}
