package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/oidcd/oidcd/node"
)

const recoverUsage = `Usage: oidcd recover --data-dir DIR [--voters ID,ID,...]

Brings a cluster back after the voters that made its quorum are lost for
good (a site destroyed, disks gone): the stopped node whose data directory
is DIR, with the members named in --voters (server ids from "oidcd admin
cluster status"; default: this node alone), becomes the voters of a new
configuration. An edge replica (--non-voter) recovered this way is the new
core. The node keeps everything its log holds, writes a snapshot with the
new configuration and empties its log. Run it on every node named in
--voters, with the same list, while they are stopped; then start them as
before. Every other node rejoins with an empty data directory and --join.

Writes the core's last moments may still have held back are kept if this
node had received them: the recovered state can be slightly ahead of what
was acknowledged, never behind what this node applied.
`

func recoverCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("oidcd recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsage); fs.PrintDefaults() }
	dataDir := fs.String("data-dir", "", "the data directory of the stopped node (required)")
	voters := fs.String("voters", "", "comma-separated server ids of the new voters, this node among them (default: this node alone)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dataDir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	var ids []string
	for _, id := range strings.Split(*voters, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	written, err := node.Recover(*dataDir, ids, log)
	if err != nil {
		fmt.Fprintln(stderr, "oidcd recover:", err)
		return 1
	}
	fmt.Fprintln(stdout, "recovered; the voters are now:")
	for _, v := range written {
		fmt.Fprintln(stdout, "  "+v)
	}
	fmt.Fprintln(stdout, "start the node(s) as before; other nodes rejoin with an empty data directory")
	return 0
}
