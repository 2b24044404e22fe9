package testcluster

import (
	"fmt"
	"strings"
	"testing"
)

func TestLogRing(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"empty", nil, ""},
		{"in order", []string{"time=1 a", "time=2 b"}, "time=1 a\ntime=2 b\n"},
		{"repeats are counted", []string{"time=1 a", "time=2 x", "time=3 x", "time=4 x", "time=5 b"},
			"time=1 a\ntime=2 x [and 2 more like it, the last at 4]\ntime=5 b\n"},
		{"alike only when next to each other", []string{"time=1 x", "time=2 y", "time=3 x"}, "time=1 x\ntime=2 y\ntime=3 x\n"},
		{"no time", []string{"plain", "plain"}, "plain [and 1 more like it, the last at ]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r logRing
			for _, l := range tt.lines {
				r.Write([]byte(l + "\n"))
			}
			if got := r.String(); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLogRingKeepsTheLast: past ringLines, the oldest lines go first.
func TestLogRingKeepsTheLast(t *testing.T) {
	var r logRing
	for i := range ringLines + 5 {
		fmt.Fprintf(&r, "time=%d line %d\n", i, i)
	}
	got := strings.Split(strings.TrimSuffix(r.String(), "\n"), "\n")
	if len(got) != ringLines || got[0] != "time=5 line 5" || got[len(got)-1] != fmt.Sprintf("time=%d line %d", ringLines+4, ringLines+4) {
		t.Fatalf("kept %d lines, from %q to %q", len(got), got[0], got[len(got)-1])
	}
}
