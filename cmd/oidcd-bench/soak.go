package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// soakReport holds what a long run watches grow besides latency.
type soakReport struct {
	DataDirBytes *startEnd `json:"data_dir_bytes,omitempty"`
	RSSBytes     *startEnd `json:"rss_bytes,omitempty"`
}

type startEnd struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// soakProbe measures the node's data dir and process.
type soakProbe struct {
	dataDir string
	pid     int
	rep     soakReport
}

// startSoak takes the starting figures (errors were ruled out when the
// flags were checked; a later one leaves a figure at -1).
func startSoak(cfg *config) *soakProbe {
	s := &soakProbe{dataDir: cfg.dataDir, pid: cfg.pid}
	if s.dataDir != "" {
		s.rep.DataDirBytes = &startEnd{Start: s.size()}
	}
	if s.pid != 0 {
		s.rep.RSSBytes = &startEnd{Start: s.rss()}
	}
	return s
}

func (s *soakProbe) size() int64 {
	n, err := dirSize(s.dataDir)
	if err != nil {
		return -1
	}
	return n
}

func (s *soakProbe) rss() int64 {
	n, err := readRSS(s.pid)
	if err != nil {
		return -1
	}
	return n
}

// finish takes the end figures.
func (s *soakProbe) finish() *soakReport {
	if s.rep.DataDirBytes != nil {
		s.rep.DataDirBytes.End = s.size()
	}
	if s.rep.RSSBytes != nil {
		s.rep.RSSBytes.End = s.rss()
	}
	return &s.rep
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
			logf(w, "%s", line)
			lastOps, last = ops, now
		}
	}
}

// dirSize is the total size of the regular files under dir. Files that
// vanish during the walk (a snapshot being replaced) are skipped.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
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
		total += info.Size()
		return nil
	})
	return total, err
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
