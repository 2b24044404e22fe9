package cli

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
)

// statusShow is `oidcd admin status`: GET /status, one screen.
func statusShow(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: "/status", show: showStatus, verdict: statusVerdict}, nil
	}
}

// statusAnswer is the part of GET /status the CLI reads.
type statusAnswer struct {
	Node struct {
		ID           string `json:"id"`
		Version      string `json:"version"`
		State        string `json:"state"`
		CommitIndex  any    `json:"commit_index"`
		AppliedIndex any    `json:"applied_index"`
	} `json:"node"`
	Leader      string           `json:"leader"`
	Members     []map[string]any `json:"members"`
	StateFormat *int             `json:"state_format"` // nil: a server before the state-format gate
	Mixed       bool             `json:"mixed"`
	Keys        []map[string]any `json:"keys"`
	Deliveries  struct {
		Pending any              `json:"pending"`
		More    bool             `json:"more"`
		Oldest  []map[string]any `json:"oldest"`
	} `json:"deliveries"`
}

// statusVerdict is ExitNoLeader when the answering node knows no leader.
func statusVerdict(body []byte) int {
	var st statusAnswer
	if decode(body, &st) != nil || st.Leader == "" {
		return ExitNoLeader
	}
	return ExitOK
}

var deliveryTable = []column{
	col("ID", "id"), col("CLIENT", "client_id"), col("URI", "uri"), col("CAUSE", "cause"),
	col("ATTEMPTS", "attempts"), col("NEXT_ATTEMPT_AT", "next_attempt_at"), col("LAST_ERROR", "last_error"),
}

func showStatus(w io.Writer, body []byte) error {
	var st statusAnswer
	if err := decode(body, &st); err != nil {
		return err
	}
	n := st.Node
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "node\t%s (%s), version %s\n", text(n.ID), text(n.State), text(n.Version))
	fmt.Fprintf(tw, "applied index\t%s (commit index %s)\n", text(n.AppliedIndex), text(n.CommitIndex))
	leader := "none"
	if st.Leader != "" {
		leader = clean(st.Leader)
	}
	fmt.Fprintf(tw, "leader\t%s\n", leader)
	voters, healthy := 0, 0
	for _, m := range st.Members {
		if v, _ := m["voter"].(bool); v {
			voters++
		}
		switch m["state"] {
		case "leader", "follower":
			healthy++
		}
	}
	fmt.Fprintf(tw, "members\t%d (%d voters, %d leader or follower)\n", len(st.Members), voters, healthy)
	if st.StateFormat != nil {
		fmt.Fprintf(tw, "state format\t%d%s\n", *st.StateFormat, mixedMark(st.Mixed))
	}
	states := map[string]int{}
	for _, k := range st.Keys {
		s, _ := k["state"].(string)
		states[s]++
	}
	fmt.Fprintf(tw, "signing keys\t%d active, %d next, %d retired\n", states["active"], states["next"], states["retired"])
	more := ""
	if st.Deliveries.More {
		more = " or more"
	}
	fmt.Fprintf(tw, "pending back-channel deliveries\t%s%s\n", text(st.Deliveries.Pending), more)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Members) > 0 {
		for _, m := range st.Members {
			id, _ := m["id"].(string)
			m[leaderMark] = st.Leader != "" && id == st.Leader
		}
		fmt.Fprintln(w, "\nMembers")
		if err := writeTable(w, memberTable, st.Members); err != nil {
			return err
		}
	}
	if len(st.Keys) > 0 {
		fmt.Fprintln(w, "\nSigning keys")
		if err := writeTable(w, keyTable.cols, st.Keys); err != nil {
			return err
		}
	}
	if len(st.Deliveries.Oldest) > 0 {
		fmt.Fprintf(w, "\nOldest pending deliveries (%d shown)\n", len(st.Deliveries.Oldest))
		if err := writeTable(w, deliveryTable, st.Deliveries.Oldest); err != nil {
			return err
		}
	}
	if st.Mixed && st.StateFormat != nil {
		fmt.Fprint(w, "\n"+mixedNote(*st.StateFormat, st.Members))
	}
	if st.Leader == "" {
		fmt.Fprintln(w, "\n"+strings.TrimSpace(noLeaderNote))
	}
	return nil
}

const noLeaderNote = `
This node knows no leader: the cluster is still forming, or has lost its
majority. Writes and sign-ins wait until a leader is elected.`
