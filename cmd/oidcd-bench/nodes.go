package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/node"
)

// nodesInfo is the one JSON line `oidcd-bench nodes` prints once its
// nodes serve: where they are and how to administer them.
type nodesInfo struct {
	PID        int      `json:"pid"`
	GOMAXPROCS int      `json:"gomaxprocs"`
	Issuer     string   `json:"issuer,omitempty"`
	URLs       []string `json:"urls,omitempty"`
	DataDirs   []string `json:"data_dirs,omitempty"`
	AdminToken string   `json:"admin_token,omitempty"`
	Trivial    string   `json:"trivial,omitempty"`
	Control    string   `json:"control"` // GET /memstats (heapStats), ?reset=1 restarts the peak; GET /debug/pprof/profile
	Pprof      []string `json:"pprof,omitempty"`
	Password   string   `json:"password_params"`
	Slots      int      `json:"argon2id_slots"` // the hasher's semaphore
}

// nodesConfig is the command line of `oidcd-bench nodes`.
type nodesConfig struct {
	size        int
	dir         string
	trivial     bool
	pprof       bool
	sessionIdle time.Duration
	reapGrace   time.Duration
	reapEvery   time.Duration
	auditKeep   time.Duration
	logLevel    string
	grown       int
}

// runNodes is `oidcd-bench nodes`: it starts --size nodes in this process
// through package node, configured the way testcluster configures them
// (static peers, one shared issuer, a fixed admin token, 127.0.0.1 on
// ports the kernel picks) but with the production argon2id parameters
// and raft timings and the rate limit off, prints a nodesInfo line on
// stdout and serves until its standard input ends or it is signalled.
// With --trivial it also serves a trivial JSON handler, the ceiling the
// read paths are compared with. The matrix and soak runs start it as a
// child process, so that the load generator and the provider do not
// share a Go runtime.
func runNodes(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("oidcd-bench nodes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nc nodesConfig
	fs.IntVar(&nc.size, "size", 1, "number of nodes (0-5); 0 with --trivial serves only the trivial handler")
	fs.StringVar(&nc.dir, "dir", "", "parent of the nodes' data directories (default: a temporary directory, removed at exit)")
	fs.BoolVar(&nc.trivial, "trivial", false, "also serve a trivial net/http JSON handler on its own port")
	fs.BoolVar(&nc.pprof, "pprof", false, "give every node a pprof listener on 127.0.0.1 (node.Config.PprofAddr)")
	fs.DurationVar(&nc.sessionIdle, "session-idle", 0, "SSO session idle lifetime (default: the node's)")
	fs.DurationVar(&nc.reapGrace, "reap-grace", 0, "how long after expiry records are reaped (default: the node's, 5m)")
	fs.DurationVar(&nc.reapEvery, "reap-every", 0, "how often the leader reaps expired records (default: the node's)")
	fs.DurationVar(&nc.auditKeep, "audit-retention", 0, "how long audit events are kept (default: the node's, 90 days)")
	fs.StringVar(&nc.logLevel, "log-level", "error", "node logs on stderr: debug, info, warn, error or none")
	fs.IntVar(&nc.grown, "grown", 0, "before serving, grow the store through raft to this many signed-in people (fsmtest.Grown: two memberships, a live SSO session, app session and access token each), then take a snapshot")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(nc.logLevel)); (err != nil && nc.logLevel != "none") || nc.size < 0 || nc.size > 5 || (nc.size == 0 && !nc.trivial) ||
		nc.grown < 0 || (nc.grown > 0 && nc.size == 0) {
		fmt.Fprintln(stderr, "oidcd-bench nodes: want --size 1-5 (or 0 with --trivial), a valid --log-level and --grown only with nodes")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if nc.logLevel == "none" {
		log = slog.New(slog.DiscardHandler)
	}

	info, stop, err := startNodes(ctx, nc, log, stderr)
	defer stop()
	if err != nil {
		fmt.Fprintln(stderr, "oidcd-bench nodes:", err)
		return 1
	}
	b, _ := json.Marshal(info)
	fmt.Fprintf(stdout, "%s\n", b)

	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return 0
}

// startNodes starts the nodes and the trivial handler of nc and waits
// until every node knows a leader and holds the signing and browser keys.
// stop closes everything and removes a temporary directory.
func startNodes(ctx context.Context, nc nodesConfig, log *slog.Logger, stderr io.Writer) (*nodesInfo, func(), error) {
	info := &nodesInfo{PID: os.Getpid(), GOMAXPROCS: runtime.GOMAXPROCS(0), Slots: runtime.GOMAXPROCS(0)}
	p := password.DefaultParams()
	info.Password = fmt.Sprintf("m=%d,t=%d,p=%d", p.Memory, p.Time, p.Threads)
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	mw := startHeapWatch(10 * time.Millisecond)
	closers = append(closers, mw.stop)
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, stop, err
	}
	cmux := http.NewServeMux()
	cmux.Handle("/memstats", mw)
	cmux.HandleFunc("/debug/pprof/profile", pprof.Profile) // the matrix's explanations
	csrv := &http.Server{Handler: cmux, ReadHeaderTimeout: 5 * time.Second}
	go csrv.Serve(cln)
	closers = append(closers, func() { csrv.Close() })
	info.Control = "http://" + cln.Addr().String()
	if nc.trivial {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, stop, err
		}
		srv := &http.Server{Handler: trivialHandler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
		go srv.Serve(ln)
		closers = append(closers, func() { srv.Close() })
		info.Trivial = "http://" + ln.Addr().String()
	}
	if nc.size == 0 {
		return info, stop, nil
	}
	dir := nc.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "oidcd-bench-nodes-")
		if err != nil {
			return nil, stop, err
		}
		closers = append(closers, func() { os.RemoveAll(tmp) })
		dir = tmp
	}
	token := randomHex(24)
	key := make([]byte, 32)
	rand.Read(key)
	httpLns, raftLns := make([]net.Listener, nc.size), make([]net.Listener, nc.size)
	var peers []node.Peer
	for i := range nc.size {
		var err error
		if httpLns[i], err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
			raftLns[i], err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			return nil, stop, err
		}
		peers = append(peers, node.Peer{ID: fmt.Sprintf("node-%d", i), RaftAddr: raftLns[i].Addr().String()})
	}
	// One issuer for every node: the first node's URL. The load generator
	// is told it and never dials it specially.
	info.Issuer = "http://" + httpLns[0].Addr().String()
	info.AdminToken = token
	var nodes []*node.Node
	for i := range nc.size {
		cfg := node.Config{
			Issuer:          info.Issuer,
			HTTPAddr:        httpLns[i].Addr().String(),
			DataDir:         fmt.Sprintf("%s/node-%d", dir, i),
			RaftAddr:        raftLns[i].Addr().String(),
			BootstrapExpect: nc.size,
			NodeID:          peers[i].ID,
			AdminToken:      token,
			RateLimit:       "off",
			SessionIdle:     nc.sessionIdle,
			ReapGrace:       nc.reapGrace,
			ReapEvery:       nc.reapEvery,
			AuditRetention:  nc.auditKeep,
			Logger:          log.With("n", i),
			HTTPListener:    httpLns[i],
			RaftListener:    raftLns[i],
			PasswordParams:  password.DefaultParams(),
		}
		if nc.sessionIdle > 0 {
			cfg.SessionMax = max(nc.sessionIdle, node.DefaultSessionMax)
		}
		if nc.size > 1 {
			cfg.StaticPeers = peers
			cfg.ClusterKey = base64.StdEncoding.EncodeToString(key)
		}
		if nc.pprof {
			cfg.PprofAddr = "127.0.0.1:0"
		}
		n, err := node.New(cfg)
		if err != nil {
			httpLns[i].Close()
			raftLns[i].Close()
			return nil, stop, fmt.Errorf("node %d: %w", i, err)
		}
		if err := n.Start(); err != nil {
			n.Close()
			return nil, stop, fmt.Errorf("node %d: %w", i, err)
		}
		closers = append(closers, func() { n.Close() })
		if i == 0 {
			mw.setTrail(func() (fsm.AuditStats, error) { return n.FSM().State().AuditStats() })
		}
		nodes = append(nodes, n)
		info.URLs = append(info.URLs, "http://"+n.Addr())
		info.DataDirs = append(info.DataDirs, n.DataDir())
		if nc.pprof {
			info.Pprof = append(info.Pprof, n.PprofAddr())
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for i, n := range nodes {
		if err := waitUsable(wctx, n); err != nil {
			return nil, stop, fmt.Errorf("node %d: %w", i, err)
		}
	}
	if nc.grown > 0 {
		if err := grow(ctx, nodes, nc.grown, stderr); err != nil {
			return nil, stop, err
		}
	}
	return info, stop, nil
}

// grow writes fsmtest.Grown(people) through the nodes' raft (256 writes
// in flight), waits until every node has applied it, and has the leader
// take a snapshot, as a site of that size would have.
func grow(ctx context.Context, nodes []*node.Node, people int, stderr io.Writer) error {
	began := time.Now()
	logf(stderr, "growing the store to %d signed-in people through raft", people)
	writes, err := fsmtest.GrowThrough(people, time.Now(), 256, nodes[0].Cluster().Apply)
	if err != nil {
		return fmt.Errorf("growing the store: %w", err)
	}
	logf(stderr, "grew the store: %d writes in %s (%.0f/s)", writes, time.Since(began).Round(time.Second), float64(writes)/time.Since(began).Seconds())
	for i, n := range nodes {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := n.Cluster().ReadIndex(wctx)
		cancel()
		if err != nil {
			return fmt.Errorf("node %d catching up with the grown store: %w", i, err)
		}
		if err := n.Cluster().Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrNotLeader) {
			return fmt.Errorf("node %d: snapshot of the grown store: %w", i, err)
		}
	}
	logf(stderr, "the grown store is on every node and in a snapshot (%s in all)", time.Since(began).Round(time.Second))
	return nil
}

// waitUsable is testcluster's WaitLeader for one node: a leader is known
// and the node holds the signing key and the browser key.
func waitUsable(ctx context.Context, n *node.Node) error {
	if err := n.Cluster().WaitLeader(ctx); err != nil {
		return fmt.Errorf("no leader: %w", err)
	}
	for {
		_, err := n.Keys().JWKS()
		if err == nil {
			_, err = n.FSM().State().Secret(fsm.SecretBrowserKey)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no signing key: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// trivialHandler is the ceiling of the read paths: net/http answering a
// constant JSON body, nothing else (no routing, no middleware, no
// encoding per request), so no handler of the provider can beat it.
func trivialHandler() http.Handler {
	body := []byte(`{"status":"ok"}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
}

// child is a running `oidcd-bench nodes` process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	info  nodesInfo
	done  chan error
}

// spawnNodes starts this executable as `oidcd-bench nodes args...` and
// waits for its nodesInfo line.
func spawnNodes(ctx context.Context, stderr io.Writer, wait time.Duration, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{"nodes"}, args...)...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		s, _ := br.ReadString('\n')
		line <- s
		io.Copy(io.Discard, br)
		c.done <- cmd.Wait()
	}()
	select {
	case s := <-line:
		if err := json.Unmarshal([]byte(s), &c.info); err != nil {
			c.stop()
			return nil, fmt.Errorf("oidcd-bench nodes did not start (%q)", strings.TrimSpace(s))
		}
		return c, nil
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	case <-time.After(wait):
		c.stop()
		return nil, fmt.Errorf("oidcd-bench nodes: not serving after %s", wait)
	}
}

// stop ends the child: its standard input closes, it closes its nodes;
// after 30 s it is killed.
func (c *child) stop() {
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// heapStats is the answer of the child's GET /memstats: the Go heap of
// the node process as runtime/metrics sees it, which the race detector's
// shadow memory (in the tests) does not inflate as it does the RSS.
type heapStats struct {
	// ObjectsBytes is the heap's live objects plus the dead ones not yet
	// swept ("/memory/classes/heap/objects:bytes"), now; PeakBytes the
	// highest sample since the start or the last reset.
	ObjectsBytes uint64 `json:"heap_objects_bytes"`
	PeakBytes    uint64 `json:"heap_peak_bytes"`
	// LiveBytes is the heap marked live by the last collection
	// ("/gc/heap/live:bytes"): what a leak would make grow.
	LiveBytes uint64 `json:"heap_live_bytes"`
	GCCycles  uint64 `json:"gc_cycles"`
	// AuditBytes and AuditEvents are the first node's audit trail
	// (fsm.AuditStats): what --audit-retention keeps; -1 when unknown.
	AuditBytes  int64 `json:"audit_bytes"`
	AuditEvents int64 `json:"audit_events"`
}

// heapWatch samples the heap every period and serves heapStats.
type heapWatch struct {
	mu    sync.Mutex
	peak  uint64
	trail func() (fsm.AuditStats, error)
	done  chan struct{}
	wg    sync.WaitGroup
}

func startHeapWatch(period time.Duration) *heapWatch {
	w := &heapWatch{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.sample()
			}
		}
	}()
	return w
}

// sample reads the heap now and raises the peak.
func (w *heapWatch) sample() heapStats {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var st heapStats
	for i, dst := range []*uint64{&st.ObjectsBytes, &st.GCCycles, &st.LiveBytes} {
		if s[i].Value.Kind() == metrics.KindUint64 {
			*dst = s[i].Value.Uint64()
		}
	}
	w.mu.Lock()
	w.peak = max(w.peak, st.ObjectsBytes)
	st.PeakBytes = w.peak
	w.mu.Unlock()
	return st
}

func (w *heapWatch) setTrail(f func() (fsm.AuditStats, error)) {
	w.mu.Lock()
	w.trail = f
	w.mu.Unlock()
}

func (w *heapWatch) stop() {
	close(w.done)
	w.wg.Wait()
}

// ServeHTTP is GET /memstats[?reset=1].
func (w *heapWatch) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/memstats" {
		http.NotFound(rw, r)
		return
	}
	st := w.sample()
	st.AuditBytes, st.AuditEvents = -1, -1
	w.mu.Lock()
	trail := w.trail
	w.mu.Unlock()
	if trail != nil {
		if a, err := trail(); err == nil {
			st.AuditBytes, st.AuditEvents = int64(a.Bytes), int64(a.Events)
		}
	}
	if r.URL.Query().Get("reset") == "1" {
		w.mu.Lock()
		w.peak = st.ObjectsBytes
		w.mu.Unlock()
		st.PeakBytes = st.ObjectsBytes
	}
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(st)
}

// readHeap asks a child's control listener for its heap figures.
func readHeap(ctx context.Context, control string, reset bool) (heapStats, error) {
	u := control + "/memstats"
	if reset {
		u += "?reset=1"
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return heapStats{}, err
	}
	hc := &http.Client{Transport: newTransport(1), Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return heapStats{}, err
	}
	defer resp.Body.Close()
	var st heapStats
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: status %d", u, resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}
