package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestNonVoterIgnoresBootstrapExpect: a non-voter given the core's
// --bootstrap-expect (and static peers) is a valid configuration; the node
// drops both, says so in its log, and still needs --join.
func TestNonVoterIgnoresBootstrapExpect(t *testing.T) {
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	cases := []struct {
		name    string
		cfg     Config
		logged  bool
		wantErr string // a substring; "" = valid
	}{
		{"the core's --bootstrap-expect", Config{NonVoter: true, BootstrapExpect: 3, Join: []string{"127.0.0.1:8301"}, ClusterKey: key}, true, ""},
		{"static peers", Config{NonVoter: true, StaticPeers: []Peer{{"a", "127.0.0.1:1"}, {"b", "127.0.0.1:2"}}, Join: []string{"127.0.0.1:8301"}, ClusterKey: key}, true, ""},
		{"nothing to ignore", Config{NonVoter: true, Join: []string{"127.0.0.1:8301"}, ClusterKey: key}, false, ""},
		{"still needs --join", Config{NonVoter: true, BootstrapExpect: 3, ClusterKey: key}, true, "--non-voter needs --join"},
		{"a voter keeps its --bootstrap-expect", Config{BootstrapExpect: 3, Join: []string{"127.0.0.1:8301"}, ClusterKey: key}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := c.cfg
			cfg.DataDir = t.TempDir()
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			wantExpect, wantPeers := cfg.BootstrapExpect, len(cfg.StaticPeers)
			if cfg.NonVoter {
				wantExpect, wantPeers = 1, 0
			}
			cfg.setDefaults()
			err := cfg.Validate()
			if (c.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("got error %v, want %q", err, c.wantErr)
			}
			if cfg.BootstrapExpect != wantExpect || len(cfg.StaticPeers) != wantPeers {
				t.Errorf("got bootstrap-expect %d and %d static peers, want %d and %d", cfg.BootstrapExpect, len(cfg.StaticPeers), wantExpect, wantPeers)
			}
			if got := strings.Contains(logs.String(), "--non-voter: ignoring --bootstrap-expect"); got != c.logged {
				t.Errorf("logged the ignored settings: got %v, want %v (log %q)", got, c.logged, logs.String())
			}
		})
	}
}
