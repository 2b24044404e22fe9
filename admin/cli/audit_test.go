package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pagedTrail is a fake GET /audit over n events: pages of at most limit
// after after; with wait, an empty page comes after a short delay and a
// new event is added (a long poll that an event ended).
type pagedTrail struct {
	mu    sync.Mutex
	n     uint64
	calls []string
}

func (p *pagedTrail) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	p.calls = append(p.calls, r.URL.RawQuery)
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	if after >= p.n && q.Get("wait") != "" {
		p.n++ // the event the long poll waited for
	}
	var data []string
	next := after
	for s := after + 1; s <= p.n && len(data) < limit; s++ {
		data = append(data, fmt.Sprintf(`{"seq": %d, "type": "signin"}`, s))
		next = s
	}
	p.mu.Unlock()
	fmt.Fprintf(w, `{"data": [%s], "next_after": %d}`, strings.Join(data, ","), next)
}

// TestAuditTail: tail prints every event after --after as one compact
// JSON line, page after page, and stops at the end; --follow then long-
// polls for more (wait=), and resumes from the last seq printed.
func TestAuditTail(t *testing.T) {
	trail := &pagedTrail{n: 2500}
	srv := httptest.NewServer(trail)
	defer srv.Close()
	env := func(k string) string { return map[string]string{EnvAddr: srv.URL, EnvToken: "tok"}[k] }

	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"audit", "tail", "--after", "100"}, env, nil, &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2400 || lines[0] != `{"seq":101,"type":"signin"}` || lines[2399] != `{"seq":2500,"type":"signin"}` {
		t.Fatalf("tail printed %d lines, first %q last %q", len(lines), lines[0], lines[len(lines)-1])
	}

	ctx, cancel := context.WithCancel(context.Background())
	out.Reset()
	done := make(chan int)
	go func() {
		done <- Run(ctx, []string{"audit", "tail", "--follow", "--after", "2499"}, env, nil, &out, &errb)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		trail.mu.Lock()
		n := trail.n
		trail.mu.Unlock()
		if n >= 2503 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("follow: exit %d", code)
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) < 3 || got[0] != `{"seq":2500,"type":"signin"}` || got[1] != `{"seq":2501,"type":"signin"}` || got[2] != `{"seq":2502,"type":"signin"}` {
		t.Fatalf("follow printed %q", got)
	}
	trail.mu.Lock()
	last := trail.calls[len(trail.calls)-1]
	trail.mu.Unlock()
	if !strings.Contains(last, "wait=") {
		t.Fatalf("follow did not long-poll: %q", last)
	}
}
