package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// soakReport holds what a long run watches grow besides latency: the
// node's data dir and resident set, at the start, at the mark (by
// default minute 2, when caches and connection pools have filled), at
// the end, and the highest sample in between.
type soakReport struct {
	MarkS        float64  `json:"mark_s"`         // when the mark figures were taken; 0 = the run ended first
	SampleS      float64  `json:"sample_every_s"` // how often the peak was sampled
	DataDirBytes *figures `json:"data_dir_bytes,omitempty"`
	RSSBytes     *figures `json:"rss_bytes,omitempty"`
	// HeapBytes is the node process's live Go heap (as of its last
	// collection), when the process is one the soak command started.
	HeapBytes *figures `json:"heap_bytes,omitempty"`
	// AuditBytes is the node's audit trail (oidcd_audit_bytes): flat once
	// --audit-retention prunes as much as the load adds.
	AuditBytes *figures `json:"audit_bytes,omitempty"`
	// PartsMark and PartsEnd are the data dir by kind of file (dirParts)
	// at the mark and at the end: what grew.
	PartsMark map[string]int64 `json:"data_dir_parts_mark,omitempty"`
	PartsEnd  map[string]int64 `json:"data_dir_parts_end,omitempty"`
	// PartsGrewS is, for each kind of file, when in the run (seconds) it
	// last grew past its largest size so far.
	PartsGrewS map[string]float64 `json:"data_dir_parts_last_grew_s,omitempty"`
	partsPeak  map[string]int64
}

// figures are one quantity over a run; -1 where it could not be read.
type figures struct {
	Start int64 `json:"start"`
	Mark  int64 `json:"mark,omitempty"`
	End   int64 `json:"end"`
	Peak  int64 `json:"peak"`
	// MarkMedian and EndMedian are the medians of the samples within
	// medianWindow/2 of the mark and of the last medianWindow: a password
	// sign-in's 19 MiB argon2id block, allocated and collected, moves one
	// sample of the RSS by tens of MiB either way.
	MarkMedian int64 `json:"mark_median,omitempty"`
	EndMedian  int64 `json:"end_median,omitempty"`

	samples []timed // every sample, for the medians
}

type timed struct {
	at time.Duration
	v  int64
}

// medianWindow is how much of the run each median covers.
const medianWindow = 30 * time.Second

// growth is End against Mark (against Start when there is no mark), as
// a fraction: 0.05 is 5 % more; the medians when there are.
func (f *figures) growth() float64 {
	base, end := f.Start, f.End
	if f.Mark > 0 {
		base = f.Mark
	}
	if f.MarkMedian > 0 && f.EndMedian > 0 {
		base, end = f.MarkMedian, f.EndMedian
	}
	if base <= 0 || end < 0 {
		return 0
	}
	return float64(end-base) / float64(base)
}

// medians fills MarkMedian and EndMedian from the samples, given the
// mark and the end of the run.
func (f *figures) medians(mark, end time.Duration) {
	median := func(from, to time.Duration) int64 {
		var vs []int64
		for _, s := range f.samples {
			if s.at >= from && s.at <= to && s.v >= 0 {
				vs = append(vs, s.v)
			}
		}
		if len(vs) == 0 {
			return 0
		}
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	if mark > 0 {
		f.MarkMedian = median(mark-medianWindow/2, mark+medianWindow/2)
	}
	f.EndMedian = median(end-medianWindow, end)
}

// soakProbe measures the node's data dir and process: at the start, every
// sample period (keeping the peak), once at the mark and at the end.
type soakProbe struct {
	dataDir string
	pid     int
	control string // the child's control listener (heap figures); "" = none
	start   time.Time
	mark    time.Duration

	mu   sync.Mutex
	rep  soakReport
	stop chan struct{}
	done chan struct{}
}

// startSoak takes the starting figures (errors were ruled out when the
// flags were checked; a later one leaves a figure at -1) and samples
// until ctx ends or finish is called.
func startSoak(ctx context.Context, cfg *config) *soakProbe {
	s := &soakProbe{dataDir: cfg.dataDir, pid: cfg.pid, control: cfg.control, start: time.Now(), mark: cfg.soakMark,
		stop: make(chan struct{}), done: make(chan struct{})}
	s.rep.SampleS = cfg.soakSample.Seconds()
	if s.dataDir != "" {
		n := s.size()
		s.rep.DataDirBytes = &figures{Start: n, Peak: n}
	}
	if s.pid != 0 {
		n := s.rss()
		s.rep.RSSBytes = &figures{Start: n, Peak: n}
	}
	if s.control != "" {
		n, a := s.heapAndTrail()
		s.rep.HeapBytes = &figures{Start: n, Peak: n}
		s.rep.AuditBytes = &figures{Start: a, Peak: a}
	}
	go s.sample(ctx, cfg.soakSample)
	return s
}

// sample updates the peaks every period and takes the mark figures once.
func (s *soakProbe) sample(ctx context.Context, period time.Duration) {
	defer close(s.done)
	t := time.NewTicker(period)
	defer t.Stop()
	var mark <-chan time.Time
	if s.mark > 0 {
		mt := time.NewTimer(s.mark)
		defer mt.Stop()
		mark = mt.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case <-t.C:
			s.take(false)
		case <-mark:
			s.take(true)
		}
	}
}

// take reads the figures once (one walk of the data dir, one question to
// the child), as the mark when mark is set.
func (s *soakProbe) take(mark bool) (size, rss, heap, trail int64, parts map[string]int64) {
	size, rss, heap, trail = -1, -1, -1, -1
	if s.dataDir != "" {
		if parts = s.parts(); parts != nil {
			size = 0
			for _, n := range parts {
				size += n
			}
		}
	}
	if s.pid != 0 {
		rss = s.rss()
	}
	if s.control != "" {
		heap, trail = s.heapAndTrail()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range []struct {
		f *figures
		v int64
	}{{s.rep.DataDirBytes, size}, {s.rep.RSSBytes, rss}, {s.rep.HeapBytes, heap}, {s.rep.AuditBytes, trail}} {
		if x.f == nil {
			continue
		}
		x.f.Peak = max(x.f.Peak, x.v)
		x.f.samples = append(x.f.samples, timed{time.Since(s.start), x.v})
		if mark {
			x.f.Mark = x.v
		}
	}
	if mark {
		s.rep.MarkS = math.Round(time.Since(s.start).Seconds()*10) / 10
		s.rep.PartsMark = parts
	}
	if parts != nil {
		if s.rep.partsPeak == nil {
			s.rep.partsPeak, s.rep.PartsGrewS = map[string]int64{}, map[string]float64{}
		}
		for k, n := range parts {
			if n > s.rep.partsPeak[k] {
				s.rep.partsPeak[k] = n
				s.rep.PartsGrewS[k] = math.Round(time.Since(s.start).Seconds())
			}
		}
	}
	return size, rss, heap, trail, parts
}

func (s *soakProbe) size() int64 {
	n, err := dirSize(s.dataDir)
	if err != nil {
		return -1
	}
	return n
}

// heapAndTrail are the child's live heap and audit trail, -1 each when
// it does not answer.
func (s *soakProbe) heapAndTrail() (heap, trail int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := readHeap(ctx, s.control, false)
	if err != nil {
		return -1, -1
	}
	return int64(st.LiveBytes), st.AuditBytes
}

func (s *soakProbe) parts() map[string]int64 {
	if s.dataDir == "" {
		return nil
	}
	p, err := dirParts(s.dataDir)
	if err != nil {
		return nil
	}
	return p
}

func (s *soakProbe) rss() int64 {
	n, err := readRSS(s.pid)
	if err != nil {
		return -1
	}
	return n
}

// finish stops the sampling and takes the end figures.
func (s *soakProbe) finish() *soakReport {
	close(s.stop)
	<-s.done
	size, rss, heap, trail, parts := s.take(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.PartsEnd = parts
	if f := s.rep.DataDirBytes; f != nil {
		f.End = size
	}
	if f := s.rep.RSSBytes; f != nil {
		f.End = rss
	}
	if f := s.rep.HeapBytes; f != nil {
		f.End = heap
	}
	if f := s.rep.AuditBytes; f != nil {
		f.End = trail
	}
	var mark time.Duration
	if s.rep.MarkS > 0 {
		mark = s.mark
	}
	for _, f := range []*figures{s.rep.DataDirBytes, s.rep.RSSBytes, s.rep.HeapBytes, s.rep.AuditBytes} {
		if f != nil {
			f.medians(mark, time.Since(s.start))
		}
	}
	rep := s.rep
	return &rep
}

// progress prints a line every interval until ctx ends.
func (s *soakProbe) progress(ctx context.Context, w io.Writer, r *recorder, start time.Time, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastOps uint64
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			ops, errs := r.counts()
			line := fmt.Sprintf("%s: ops %d (%.1f/s), errors %d", now.Sub(start).Round(min(interval, time.Second)), ops,
				float64(ops-lastOps)/now.Sub(last).Seconds(), errs)
			if s.dataDir != "" {
				line += ", data dir " + bytesStr(s.size())
			}
			if s.pid != 0 {
				line += ", rss " + bytesStr(s.rss())
			}
			if s.control != "" {
				heap, _ := s.heapAndTrail()
				line += ", go heap " + bytesStr(heap)
			}
			logf(w, "%s", line)
			lastOps, last = ops, now
		}
	}
}

// dirSize is the total size of the regular files under dir. Files that
// vanish during the walk (a snapshot being replaced) are skipped.
func dirSize(dir string) (int64, error) {
	var total int64
	err := walkFiles(dir, func(_ string, n int64) { total += n })
	return total, err
}

// dirParts is dirSize by what the files are to a node: its state file,
// its raft log, its raft snapshots, the rest.
func dirParts(dir string) (map[string]int64, error) {
	parts := map[string]int64{}
	err := walkFiles(dir, func(path string, n int64) {
		switch {
		case filepath.Base(path) == "state.db":
			parts["state file"] += n
		case filepath.Base(path) == "raft.db":
			parts["raft log"] += n
		case strings.Contains(filepath.ToSlash(path), "/snapshots/"):
			parts["raft snapshots"] += n
		default:
			parts["other"] += n
		}
	})
	return parts, err
}

// walkFiles calls fn with the path and size of every regular file under
// dir, skipping those that vanish during the walk.
func walkFiles(dir string, fn func(path string, size int64)) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fn(path, info.Size())
		return nil
	})
}

// readRSS returns the resident set size of process pid from
// /proc/PID/status (Linux).
func readRSS(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseRSS(f)
}

// parseRSS reads the VmRSS line ("VmRSS:	  123456 kB") of a status file.
func parseRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line (a kernel thread or a zombie?)")
}
