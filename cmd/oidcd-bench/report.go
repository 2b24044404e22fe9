package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// report is the outcome of a run. Its JSON field names are stable:
// scenario, targets, issuer, concurrency, duration_s, ops, ops_per_s,
// latency_ms{p50,p90,p99,max,mean}, errors{kind: count}, and for mixed
// the same figures by scenario under scenarios.
//
// ops counts successful operations; latency is theirs alone. Failed
// operations are counted in errors by kind: "<status> <oauth error>"
// ("400 invalid_grant", "503 temporarily_unavailable", "429 ..."),
// "timeout", "conn", "authorize <error>" for an error sent to the
// redirect URI, or a named check ("id_token_invalid", "inactive", ...).
// Operations cut short by the end of the run are in neither.
type report struct {
	Scenario    string   `json:"scenario"`
	Targets     []string `json:"targets"`
	Issuer      string   `json:"issuer"`
	Concurrency int      `json:"concurrency"`
	DurationS   float64  `json:"duration_s"`
	stats
	Scenarios map[string]stats `json:"scenarios,omitempty"`
	Soak      *soakReport      `json:"soak,omitempty"`
	// Federation is federated-signin's split of its time by host.
	Federation *fedFigures `json:"federation,omitempty"`

	samples [][2]string // one message per error kind, for the table
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\t%s\n", r.Scenario)
	fmt.Fprintf(tw, "targets\t%s\n", strings.Join(r.Targets, ", "))
	fmt.Fprintf(tw, "issuer\t%s\n", r.Issuer)
	fmt.Fprintf(tw, "concurrency\t%d\n", r.Concurrency)
	fmt.Fprintf(tw, "duration\t%.2f s\n", r.DurationS)
	fmt.Fprintln(tw)
	tw.Flush()

	rows := [][]string{{"operation", "ops", "ops/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors"}}
	row := func(name string, s stats) {
		rows = append(rows, []string{name, fmt.Sprint(s.Ops), fmt.Sprintf("%.1f", s.OpsPerS),
			fmt.Sprintf("%.3f", s.Latency.P50), fmt.Sprintf("%.3f", s.Latency.P90), fmt.Sprintf("%.3f", s.Latency.P99),
			fmt.Sprintf("%.3f", s.Latency.Max), fmt.Sprint(errorCount(s.Errors))})
	}
	if len(r.Scenarios) > 0 {
		for _, m := range mixedWeights {
			if s, ok := r.Scenarios[m.name]; ok {
				row(m.name, s)
			}
		}
		row("total", r.stats)
	} else {
		row(r.Scenario, r.stats)
	}
	if err := writeColumns(w, rows); err != nil {
		return err
	}

	if len(r.Errors) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "error\tcount\tfirst seen")
		kinds := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		sample := map[string]string{}
		for _, s := range r.samples {
			sample[s[0]] = s[1]
		}
		for _, k := range kinds {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", k, r.Errors[k], trim(sample[k], 100))
		}
		tw.Flush()
	}
	if r.Soak != nil {
		fmt.Fprintln(w)
		r.Soak.writeTable(w)
	}
	if r.Federation != nil {
		fmt.Fprintln(w)
		r.Federation.writeTable(w)
	}
	return nil
}

// writeTable prints the soak figures: start, mark, end, peak, the
// medians of 30 s around the mark and before the end, and the change
// from the mark (from the start without one) to the end, of the medians
// when there are.
func (s *soakReport) writeTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	mark := "mark"
	if s.MarkS > 0 {
		mark = fmt.Sprintf("at %.0f s", s.MarkS)
	}
	fmt.Fprintf(tw, "soak\tstart\t%s\tend\tpeak\tmedians (30 s)\tchange\n", mark)
	row := func(name string, f *figures) {
		if f == nil {
			return
		}
		m, med := "-", "-"
		if f.Mark > 0 {
			m = bytesStr(f.Mark)
		}
		if f.MarkMedian > 0 && f.EndMedian > 0 {
			med = bytesStr(f.MarkMedian) + " -> " + bytesStr(f.EndMedian)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%+.1f %%\n", name, bytesStr(f.Start), m, bytesStr(f.End), bytesStr(f.Peak), med, 100*f.growth())
	}
	row("data dir", s.DataDirBytes)
	row("rss", s.RSSBytes)
	row("go heap", s.HeapBytes)
	row("audit trail", s.AuditBytes)
	tw.Flush()
}

// writeColumns prints rows as a table: the first column aligned left,
// the figures right.
func writeColumns(w io.Writer, rows [][]string) error {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "%-*s", width[i], c)
			default:
				fmt.Fprintf(&b, "  %*s", width[i], c)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func errorCount(m map[string]uint64) uint64 {
	var n uint64
	for _, c := range m {
		n += c
	}
	return n
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// bytesStr prints a size in binary units.
func bytesStr(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for (f >= unit || f <= -unit) && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", f, [...]string{"B", "KiB", "MiB", "GiB", "TiB"}[i])
}
