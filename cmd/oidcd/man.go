package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/node"
)

// manPage writes oidcd(1) in roff (man -l - reads it from standard input).
// The options come from the serve flag set and the admin section from the
// admin CLI's own help, so the page cannot drift from the binary.
func manPage(stdout, stderr io.Writer) int {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w(".TH OIDCD 1 \"\" \"oidcd %s\" \"oidcd manual\"\n", roff(version))
	w(".SH NAME\noidcd \\- an OpenID Connect provider that needs no database\n")
	w(".SH SYNOPSIS\n.nf\n")
	for _, l := range []string{
		"oidcd serve [--config FILE] [flags]",
		"oidcd admin [global flags] NOUN VERB [flags] [args]",
		"oidcd config check [--env-file ENVFILE] FILE",
		"oidcd config example [flags]",
		"oidcd recover --data-dir DIR [--voters ID,ID,...]",
		"oidcd keygen",
		"oidcd version",
		"oidcd man",
	} {
		w("%s\n", roff(l))
	}
	w(".fi\n")
	w(".SH DESCRIPTION\n%s\n", roff(`oidcd is an OpenID Connect provider for sites without a managed database. Three or more identical nodes form a Raft cluster whose state machine is a bbolt file; one node alone is a complete provider. Every node serves the whole surface: the OIDC endpoints, the admin API under /admin/v1, /metrics, /healthz and /readyz.`))

	w(".SH SERVE OPTIONS\n%s\n", roff(`Every option can also be set in the environment as OIDCD_<OPTION> in upper snake case, and in the configuration file as a key named like the option. A flag on the command line wins over the environment, which wins over the file, which wins over the default.`))
	fs := flag.NewFlagSet("oidcd serve", flag.ContinueOnError)
	var cfg node.Config
	var lvl, join, configPath string
	serveFlags(fs, &cfg, &lvl, &join)
	fs.StringVar(&configPath, "config", "", "read settings from this TOML `file`")
	names := append([]string{"config"}, orderedFlags(fs)...)
	for _, name := range names {
		f := fs.Lookup(name)
		arg, usage := flag.UnquoteUsage(f)
		w(".TP\n.B \\-\\-%s", roff(name))
		if arg != "" {
			w(" \\fI%s\\fR", roff(arg))
		}
		w("\n%s.", roff(strings.TrimSuffix(usage, ".")))
		if f.DefValue != "" {
			w(" Default: %s.", roff(f.DefValue))
		}
		w(" Environment: OIDCD_%s.\n", roff(envName(name)))
	}

	w(".SH CONFIGURATION FILE\n.nf\n%s.fi\n", roff(configUsage))
	w(".PP\n%s\n", roff(`The Debian package installs /etc/oidcd/oidcd.toml and a systemd unit that runs "oidcd serve --config /etc/oidcd/oidcd.toml" with its data in /var/lib/oidcd. Secrets (cluster-key, admin-token) belong in /etc/oidcd/oidcd.env, mode 0600, as OIDCD_CLUSTER_KEY=... lines; systemd reads it before it drops privileges.`))

	var admin bytes.Buffer
	cli.Run(context.Background(), []string{"help"}, func(string) string { return "" }, nil, &admin, io.Discard)
	w(".SH ADMIN COMMANDS\n.nf\n%s.fi\n", roff(admin.String()))

	w(".SH RECOVERING A LOST QUORUM\n.nf\n%s.fi\n", roff(strings.TrimPrefix(recoverUsage, "Usage: ")))

	w(".SH EXIT STATUS\n%s\n", roff(`oidcd serve exits 0 after a clean shutdown on SIGINT or SIGTERM, 1 when the node cannot start or stops on an error, and 2 on a usage error (a bad flag, environment value or configuration file). oidcd config check exits 0 for a valid file, 1 for a file with problems, 2 on a usage error. oidcd admin documents its exit codes above.`))
	w(".SH FILES\n.TP\n.I /etc/oidcd/oidcd.toml\nthe configuration file of the packaged service\n")
	w(".TP\n.I /etc/oidcd/oidcd.env\nsecrets as OIDCD_* variables, read by systemd (mode 0600)\n")
	w(".TP\n.I <data-dir>/admin-token\nthe generated admin token (mode 0600), read by oidcd admin \\-\\-token\\-file\n")
	w(".TP\n.I <data-dir>/raft/, <data-dir>/state.db\n%s\n", roff("the raft log and snapshots, and the bbolt state file"))
	w(".SH EXAMPLES\n.nf\n%s.fi\n", roff(`oidcd config example --data-dir /var/lib/oidcd > oidcd.toml
oidcd config check --env-file /etc/oidcd/oidcd.env oidcd.toml
oidcd serve --config oidcd.toml
KEY=$(oidcd keygen)     # once; the same on every node of a cluster
oidcd admin --token-file /var/lib/oidcd/admin-token status
`))
	w(".SH SEE ALSO\n%s\n", roff(`systemctl(1), journalctl(1). docs/operators.md of the source tree is the operator guide; /metrics is described in docs/metrics.md.`))
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		fmt.Fprintln(stderr, "oidcd man:", err)
		return 1
	}
	return 0
}

// roff escapes text for roff: backslashes, and lines that would start a
// request.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
