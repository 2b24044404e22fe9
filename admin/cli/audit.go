package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// auditFilters are the filter flags of audit list and tail.
type auditFilters struct {
	after                     *uint64
	typ, subject, client, org *string
}

func addAuditFilters(fs *flag.FlagSet) auditFilters {
	return auditFilters{
		after:   fs.Uint64("after", 0, "only events after this `seq` (resume from the last one seen)"),
		typ:     fs.String("type", "", "only events of this `type`: signin, token, revocation, logout, admin, key"),
		subject: fs.String("subject", "", "only events of this person (`sub`)"),
		client:  fs.String("client", "", "only events of this client `ID`"),
		org:     fs.String("org", "", "only events of this organization `ID`"),
	}
}

func (f auditFilters) query(limit int) url.Values {
	q := url.Values{}
	q.Set("after", strconv.FormatUint(*f.after, 10))
	q.Set("limit", strconv.Itoa(limit))
	for k, v := range map[string]string{"type": *f.typ, "subject": *f.subject, "client_id": *f.client, "organization_id": *f.org} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

var auditTable = view{plural: "events", cols: []column{
	col("SEQ", "seq"), col("TIME", "time"), col("TYPE", "type"), col("OUTCOME", "outcome"), col("ACTOR", "actor"),
	col("SUBJECT", "subject"), col("CLIENT", "client_id"), col("IP", "ip"), col("NODE", "node"),
}}

func auditList(fs *flag.FlagSet) func(in *inv) (*request, error) {
	f := addAuditFilters(fs)
	limit := fs.Int("limit", 100, "at most `N` events (1 to 1000)")
	return func(in *inv) (*request, error) {
		if *limit < 1 || *limit > 1000 {
			return nil, errUsage("--limit must be from 1 to 1000, got %d", *limit)
		}
		return &request{method: http.MethodGet, path: "/audit", query: f.query(*limit), show: auditTable.list}, nil
	}
}

// auditTail prints events as JSON lines, page after page; with --follow
// it then waits for new ones (a long poll) until interrupted.
func auditTail(fs *flag.FlagSet) func(in *inv) (*request, error) {
	f := addAuditFilters(fs)
	follow := fs.Bool("follow", false, "keep waiting for new events (for a log shipper); stop with Ctrl-C")
	return func(in *inv) (*request, error) {
		return &request{run: func(ctx context.Context, c *conn, _ bool, stdout, stderr io.Writer) int {
			after := *f.after
			for {
				q := f.query(1000)
				q.Set("after", strconv.FormatUint(after, 10))
				if *follow {
					q.Set("wait", strconv.Itoa(longPollSeconds(c.timeout)))
				}
				a, err := c.do(ctx, &request{method: http.MethodGet, path: "/audit", query: q})
				if err != nil {
					if ctx.Err() != nil {
						return ExitOK
					}
					if *follow {
						// A node restarting: try again from the last seq printed.
						fmt.Fprintf(stderr, "warning: %s; retrying after seq %d\n", c.transportError(err), after)
						if !sleepCtx(ctx, time.Second) {
							return ExitOK
						}
						continue
					}
					fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
					return ExitUnreachable
				}
				if a.status != http.StatusOK {
					return failed(stderr, a)
				}
				var page struct {
					Data      []json.RawMessage `json:"data"`
					NextAfter uint64            `json:"next_after"`
				}
				if err := json.Unmarshal(a.body, &page); err != nil {
					fmt.Fprintf(stderr, "error: %v\n", err)
					return ExitServerError
				}
				for _, e := range page.Data {
					var line bytes.Buffer
					if json.Compact(&line, e) == nil {
						line.WriteByte('\n')
						stdout.Write(line.Bytes())
					}
				}
				after = max(after, page.NextAfter)
				if len(page.Data) == 0 && !*follow {
					return ExitOK
				}
			}
		}}, nil
	}
}

// longPollSeconds is the server-side wait of one --follow request: well
// inside the client's timeout.
func longPollSeconds(timeout time.Duration) int {
	return max(min(int((timeout-5*time.Second)/time.Second), 25), 1)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// verification is GET /audit/verify's answer.
type verification struct {
	OK       bool    `json:"ok"`
	Count    uint64  `json:"count"`
	FirstSeq uint64  `json:"first_seq"`
	LastSeq  uint64  `json:"last_seq"`
	HeadHash string  `json:"head_hash"`
	BrokenAt *uint64 `json:"broken_at,omitempty"`
	Reason   string  `json:"reason,omitempty"`
}

// nodeVerification is one node's verdict in audit verify.
type nodeVerification struct {
	Node  string        `json:"node"`
	URL   string        `json:"url"`
	Error string        `json:"error,omitempty"`
	V     *verification `json:"verify,omitempty"`
	// HashAtCommon is the node's hash of the newest seq every node holds.
	HashAtCommon string `json:"hash_at_common,omitempty"`
}

// auditVerify verifies the trail on every node of the cluster and
// compares them: the nodes apply at slightly different moments, so they
// are compared at the newest seq they all hold.
func auditVerify(fs *flag.FlagSet) func(in *inv) (*request, error) {
	nodes := fs.String("nodes", "", "comma-separated admin base `URLs` of the nodes to compare (default: every member's http_addr from cluster status, with this node's scheme)")
	return func(in *inv) (*request, error) {
		return &request{run: func(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
			targets, code := verifyTargets(ctx, c, *nodes, stderr)
			if code != ExitOK {
				return code
			}
			var out []nodeVerification
			common := uint64(0)
			first := true
			for _, t := range targets {
				nv := nodeVerification{Node: t.id, URL: t.base}
				tc := &conn{base: t.base, token: c.token, timeout: c.timeout, hc: c.hc}
				a, err := tc.do(ctx, &request{method: http.MethodGet, path: "/audit/verify"})
				switch {
				case err != nil:
					nv.Error = tc.transportError(err)
				case a.status != http.StatusOK:
					nv.Error = fmt.Sprintf("HTTP %d", a.status)
				default:
					var v verification
					if err := json.Unmarshal(a.body, &v); err != nil {
						nv.Error = err.Error()
					} else {
						nv.V = &v
						if first || v.LastSeq < common {
							common, first = v.LastSeq, false
						}
					}
				}
				out = append(out, nv)
			}
			hashes := map[string]bool{}
			for i := range out {
				if out[i].V == nil || common == 0 {
					continue
				}
				tc := &conn{base: out[i].URL, token: c.token, timeout: c.timeout, hc: c.hc}
				q := url.Values{"after": {strconv.FormatUint(common-1, 10)}, "limit": {"1"}}
				a, err := tc.do(ctx, &request{method: http.MethodGet, path: "/audit", query: q})
				if err == nil && a.status == http.StatusOK {
					var page struct {
						Data []struct {
							Seq  uint64 `json:"seq"`
							Hash string `json:"hash"`
						} `json:"data"`
					}
					if json.Unmarshal(a.body, &page) == nil && len(page.Data) == 1 && page.Data[0].Seq == common {
						out[i].HashAtCommon = page.Data[0].Hash
						hashes[page.Data[0].Hash] = true
					}
				}
			}
			ok := len(hashes) <= 1
			for _, nv := range out {
				ok = ok && nv.Error == "" && nv.V != nil && nv.V.OK
			}
			if asJSON {
				b, _ := json.MarshalIndent(struct {
					OK        bool               `json:"ok"`
					CommonSeq uint64             `json:"common_seq"`
					Nodes     []nodeVerification `json:"nodes"`
				}{ok, common, out}, "", "  ")
				stdout.Write(append(b, '\n'))
			} else {
				tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tOK\tEVENTS\tFIRST\tLAST\tHASH AT COMMON SEQ\tPROBLEM")
				for _, nv := range out {
					if nv.V == nil {
						fmt.Fprintf(tw, "%s\tno\t-\t-\t-\t-\t%s\n", nv.Node, nv.Error)
						continue
					}
					problem := ""
					if nv.V.BrokenAt != nil {
						problem = fmt.Sprintf("broken at seq %d: %s", *nv.V.BrokenAt, nv.V.Reason)
					} else if len(hashes) > 1 {
						problem = "differs from another node"
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", nv.Node, yesNo(nv.V.OK && problem == ""), nv.V.Count, nv.V.FirstSeq, nv.V.LastSeq, short(nv.HashAtCommon), problem)
				}
				tw.Flush()
				fmt.Fprintf(stdout, "compared at seq %d: %s\n", common, map[bool]string{true: "the nodes agree", false: "THE TRAIL DOES NOT VERIFY"}[ok])
			}
			if !ok {
				return ExitServerError
			}
			return ExitOK
		}}, nil
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	if h == "" {
		return "-"
	}
	return h
}

type verifyTarget struct{ id, base string }

// verifyTargets are the nodes audit verify asks: --nodes, or every member
// of cluster status at its http_addr.
func verifyTargets(ctx context.Context, c *conn, nodes string, stderr io.Writer) ([]verifyTarget, int) {
	if nodes != "" {
		var out []verifyTarget
		for _, n := range strings.Split(nodes, ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			base, err := baseURL(n)
			if err != nil {
				fmt.Fprintf(stderr, "error: --nodes: %v\n", err)
				return nil, ExitUsage
			}
			out = append(out, verifyTarget{id: n, base: base})
		}
		return out, ExitOK
	}
	a, err := c.do(ctx, &request{method: http.MethodGet, path: "/cluster"})
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
		return nil, ExitUnreachable
	}
	if a.status != http.StatusOK {
		return nil, failed(stderr, a)
	}
	var st struct {
		Members []struct {
			ID       string `json:"id"`
			HTTPAddr string `json:"http_addr"`
		} `json:"members"`
	}
	if err := json.Unmarshal(a.body, &st); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return nil, ExitServerError
	}
	scheme := "http"
	if u, err := url.Parse(c.base); err == nil {
		scheme = u.Scheme
	}
	var out []verifyTarget
	for _, m := range st.Members {
		if m.HTTPAddr == "" {
			fmt.Fprintf(stderr, "error: member %s has no http_addr in cluster status (no gossip): name the nodes with --nodes\n", m.ID)
			return nil, ExitUsage
		}
		base, err := baseURL(scheme + "://" + m.HTTPAddr)
		if err != nil {
			base = ""
		}
		out = append(out, verifyTarget{id: m.ID, base: base})
	}
	if len(out) == 0 {
		out = append(out, verifyTarget{id: "this node", base: c.base})
	}
	return out, ExitOK
}
