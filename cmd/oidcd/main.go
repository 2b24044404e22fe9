package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/oidcd/oidcd/admin/cli"
)

const usage = `oidcd: an OpenID Connect provider that needs no database.

Usage:
  oidcd serve [flags]     run a node (oidcd serve -h lists the flags)
  oidcd admin ...         the admin API from the command line (oidcd admin help)
  oidcd config check FILE check a configuration file (oidcd config help)
  oidcd config example    print a configuration file with every key
  oidcd man               print the manual page (roff; man -l - reads it)
  oidcd recover [flags]   make a stopped node the new core after its voters are lost (oidcd recover -h)
  oidcd keygen            print a fresh --cluster-key
  oidcd version           print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		restrictUmask()
		return serve(context.Background(), args[1:], env, stdout, stderr) // serve handles its signals
	case "admin":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return cli.Run(ctx, args[1:], env, stdin, stdout, stderr)
	case "config":
		return configCmd(args[1:], stdout, stderr)
	case "demo-rp":
		fmt.Fprintln(stderr, "oidcd: the demo relying party is its own binary now: oidcd-demo-rp (make build puts it in bin/)")
		return 2
	case "man":
		return manPage(stdout, stderr)
	case "recover":
		restrictUmask()
		return recoverCmd(args[1:], stdout, stderr)
	case "keygen":
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			fmt.Fprintln(stderr, "oidcd keygen:", err)
			return 1
		}
		fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(b[:]))
		return 0
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionLine())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "oidcd: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
