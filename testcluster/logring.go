package testcluster

import (
	"bytes"
	"fmt"
	"sync"
)

// logRing keeps the last lines a node logged (every node of a cluster
// writes into its own), so that a failed test can show what the nodes
// said just before it failed without a verbose run. A line that repeats
// the one before it but for its time (raft retrying a peer that is down
// every 150 ms) is counted on that line rather than kept, so that such a
// burst does not push out what came before it.
type logRing struct {
	mu    sync.Mutex
	lines []ringLine
	next  int
	full  bool
}

type ringLine struct {
	text    []byte
	repeats int    // later lines alike but for their time
	last    []byte // the time of the last of them
}

// ringLines is how many lines of each node a failed test prints.
const ringLines = 300

// Write takes one record of slog's text handler, which writes a whole
// line a call, starting with its time=… attribute.
func (r *logRing) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	when, rest := splitTime(line)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lines == nil {
		r.lines = make([]ringLine, ringLines)
	}
	if prev := &r.lines[(r.next+ringLines-1)%ringLines]; prev.text != nil {
		if _, prevRest := splitTime(prev.text); bytes.Equal(prevRest, rest) {
			prev.repeats++
			prev.last = append(prev.last[:0], when...)
			return len(p), nil
		}
	}
	l := &r.lines[r.next]
	l.text, l.repeats, l.last = append(l.text[:0], line...), 0, l.last[:0]
	r.next++
	if r.next == ringLines {
		r.next, r.full = 0, true
	}
	return len(p), nil
}

// splitTime splits a text handler's line into its leading time=… value
// and the rest.
func splitTime(line []byte) (when, rest []byte) {
	if !bytes.HasPrefix(line, []byte("time=")) {
		return nil, line
	}
	when, rest, _ = bytes.Cut(line[len("time="):], []byte(" "))
	return when, rest
}

// String is the kept lines, oldest first.
func (r *logRing) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	emit := func(ls []ringLine) {
		for _, l := range ls {
			if l.text == nil {
				continue
			}
			b.Write(l.text)
			if l.repeats > 0 {
				fmt.Fprintf(&b, " [and %d more like it, the last at %s]", l.repeats, l.last)
			}
			b.WriteByte('\n')
		}
	}
	if r.full {
		emit(r.lines[r.next:])
	}
	emit(r.lines[:r.next])
	return b.String()
}
