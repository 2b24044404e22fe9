package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

func isHelpWord(s string) bool {
	switch s {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// help serves `help [noun [verb]]`: the text goes to stdout and the exit
// code is 0, or 2 for an unknown topic.
func help(topic []string, stdout, stderr io.Writer) int {
	if len(topic) == 0 {
		writeMainHelp(stdout)
		return ExitOK
	}
	n := findNoun(topic[0])
	if n == nil {
		return usageError(stderr, fmt.Sprintf("no help for unknown command %q", topic[0]), "oidcd admin help")
	}
	if n.bare && len(topic) == 1 {
		v := &n.verbs[0]
		fs := newFlagSet(v.command(n))
		v.setup(fs)
		writeVerbHelp(stdout, n, v, fs)
		return ExitOK
	}
	if len(topic) == 1 {
		writeNounHelp(stdout, n)
		return ExitOK
	}
	// #nosec G602 -- len(topic) >= 2 here: 0 and 1 returned above
	v := n.findVerb(topic[1])
	if v == nil || len(topic) > 2 {
		return usageError(stderr, fmt.Sprintf("no help for %q", strings.Join(topic, " ")), "oidcd admin "+n.name+" help")
	}
	fs := newFlagSet(v.command(n))
	v.setup(fs)
	writeVerbHelp(stdout, n, v, fs)
	return ExitOK
}

// command is the words that name the verb: "org create", or "status"
// for a bare noun.
func (v *verb) command(n *noun) string {
	if v.name == "" {
		return n.name
	}
	return n.name + " " + v.name
}

func (v *verb) usageLine(n *noun) string {
	parts := []string{"oidcd admin", v.command(n)}
	parts = append(parts, v.args...)
	if v.synopsis != "" {
		parts = append(parts, v.synopsis)
	}
	return strings.Join(parts, " ")
}

const globalHelp = `Global flags (before the command, or after it):
  --addr URL        admin API address: http://host:port, https://host:port or
                    host:port (default ` + DefaultAddr + `, or $` + EnvAddr + `);
                    any node of the cluster will do
  --token TOKEN     admin bearer token (default $` + EnvToken + `)
  --token-file PATH read the token from PATH, e.g. <data-dir>/admin-token
  --json            print the server's JSON answer, pretty-printed, instead
                    of a table
  --timeout D       give up after this long, e.g. 30s (default 10s)
  --stale           for commands that read: answer from the node's own copy
                    of the state, without asking the leader (faster, and it
                    works on a node cut off from the leader, but it may miss
                    a write made through another node a moment ago). By
                    default a read sees every write acknowledged before it
                    began, through any node

The token is taken from --token, else --token-file, else $` + EnvToken + `,
else the sign-in "oidcd admin login" kept for --addr (in
$XDG_CONFIG_HOME/oidcd/credentials.json, ~/.config/oidcd/ by default), else
./` + DefaultTokenFile + ` (where "oidcd serve" with the default --data-dir
writes it at first start).
`

const exitHelp = `Exit codes:
  0  success
  1  the server answered with an error, printed to stderr as
       error: CODE: message (correlation id X)
     followed by one "  field: message" line per detail (or snapshot save
     could not write its file)
  2  usage error: unknown command, bad or missing flags or arguments
     (nothing was sent)
  3  the server could not be reached or did not answer within --timeout
  4  authentication failed: the server answered 401, or no token was found
  5  status only: the node answered but knows no leader (the cluster is
     forming or has lost its majority)
`

func writeMainHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: oidcd admin [global flags] <noun> <verb> [flags] [args]

Manages an oidcd cluster through its admin API (/admin/v1). Any node accepts
any call; writes reach the leader.

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range commands() {
		for _, v := range n.verbs {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(append([]string{v.command(&n)}, v.args...), " "), v.summary)
		}
	}
	tw.Flush()
	io.WriteString(w, `
Run "oidcd admin <noun> help" for the verbs and flags of a noun, and
"oidcd admin <noun> <verb> -h" for all flags of a verb.

`+globalHelp+`
Output: tables on stdout; lists end with a line "page P/T, N items" (use
--page and --page-size to move). With --json the server's answer is printed
as it is, indented. Errors and one-time notes (secrets that are shown only
once) go to stderr.

`+exitHelp+`
Examples:
  oidcd admin --addr 10.0.0.5:8080 --token-file /var/lib/oidcd/admin-token status
  oidcd admin admins create --user ann@example.com --role admin
  oidcd admin login && oidcd admin status
  oidcd admin org create --slug acme --name "Acme Inc."
  printf '%s\n' "$PW" | oidcd admin user create --email ann@example.com --email-verified --password-stdin
  oidcd admin membership create --user ann@example.com --org ORG_ID
  oidcd admin invitation create --email bob@example.com --org ORG_ID --expires-in 72h
  oidcd admin client create --name Portal --org ORG_ID \
      --redirect-uri https://portal.example.com/callback --scope openid,email,profile
  oidcd admin idp create --slug staff --display-name "Staff account" \
      --issuer https://sso.example.com/realms/staff --client-id oidcd \
      --client-secret-file /run/secrets/oidcd-staff
  oidcd admin user get USER_ID --json | jq -r .email
  oidcd admin user totp-remove ann@example.com
  oidcd admin keys rotate
  oidcd admin snapshot save /var/backups/oidcd-$(date +%F).db
`)
}

func writeNounHelp(w io.Writer, n *noun) {
	fmt.Fprintf(w, "Usage: oidcd admin %s <verb> [flags] [args]\n\n%s%s.\n\nVerbs:\n",
		n.name, strings.ToUpper(n.summary[:1]), n.summary[1:])
	for i := range n.verbs {
		v := &n.verbs[i]
		fmt.Fprintf(w, "  %s\n      %s\n", strings.TrimPrefix(v.usageLine(n), "oidcd admin "+n.name+" "), v.summary)
	}
	if len(n.aliases) > 0 {
		fmt.Fprintf(w, "\n%q may also be written %s.\n", n.name, quoteAll(n.aliases))
	}
	fmt.Fprintf(w, "\nRun \"oidcd admin %s <verb> -h\" for the flags of a verb and \"oidcd admin help\"\nfor the global flags and exit codes.\n", n.name)
}

func writeVerbHelp(w io.Writer, n *noun, v *verb, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [global flags]\n\n%s%s.\n", v.usageLine(n), strings.ToUpper(v.summary[:1]), v.summary[1:])
	if v.details != "" {
		fmt.Fprintf(w, "\n%s\n", v.details)
	}
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprint(w, "\nFlags:\n")
		writeFlags(w, fs)
	}
	fmt.Fprint(w, "\n"+globalHelp+"\n"+exitHelp)
}

// writeFlags lists the flags of fs with two dashes, in the style of
// flag.PrintDefaults.
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, usage)
	})
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
