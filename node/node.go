package node

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/admin/console"
	"github.com/oidcd/oidcd/cluster"
	"github.com/oidcd/oidcd/directory"
	"github.com/oidcd/oidcd/docs"
	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/ratelimit"
	"github.com/oidcd/oidcd/internal/sms"
	"github.com/oidcd/oidcd/internal/undo"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/logout"
	"github.com/oidcd/oidcd/oidc"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/signin"
	"github.com/oidcd/oidcd/webui"
)

// Node is one running oidcd node.
type Node struct {
	cfg        Config
	clusterKey []byte // node-to-node traffic's key (nodeClusterKey)
	log        *slog.Logger
	fsm        *fsm.FSM
	cluster    *cluster.Cluster
	keys       *keys.Manager
	hasher     *password.Hasher
	registry   *prometheus.Registry
	server     *http.Server
	listener   net.Listener
	handler    http.Handler // the public listener's
	admin      http.Handler // the admin listener's; nil: admin routes are on handler
	adminLn    net.Listener
	adminSrv   *http.Server
	certs      *certReloader      // nil without --tls-cert
	caughtUp   atomic.Bool        // a read index succeeded since start (readiness)
	closing    chan struct{}      // closed when Close begins
	draining   atomic.Bool        // Drain began: /readyz answers 503
	stopWatch  context.CancelFunc // ends certs.watch
	audit      *auditMetrics
	trail      *trailCatchUp // trail.go
	dirSync    *directory.Syncer
	diskFull   diskFullState
	provider   *oidc.Provider
	signin     *signin.Signin
	logout     *logout.Service
	sessions   *session.Manager // the browser session, one for oidc, signin and logout
	pprof      *pprofServer     // nil unless Config.PprofAddr is set
	// federation is the client of the site's upstream providers, one for
	// signin (sign-in, their logout tokens) and logout (their end session),
	// so both share its cached discovery documents and keys.
	federation *federation.Client
	// kek seals secrets at rest before they are proposed (--kek-file); nil
	// without one (see internal/kek and secrets.go).
	kek *kek.KEK
	// adminTok remembers the admin token hash this node last checked its
	// --admin-token and token file against (bootstrap.go).
	adminTok adminTokenNote
	// mail is the leader's delivery of the outbox (email.go).
	mail *email.Sender

	serveErr  chan error
	closeOnce sync.Once
	closeErr  error
}

// New builds a node and starts raft; Start begins serving HTTP.
func New(cfg Config) (_ *Node, err error) {
	var cleanup undo.Stack
	defer cleanup.OnError(&err)
	n, err := newNode(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.openState(&cleanup); err != nil {
		return nil, err
	}
	// The cluster is built first and started last: raft replays the log
	// tail into the FSM as soon as it starts, so everything the FSM's
	// OnApply hook reaches (the key cache, the logout sender) must exist
	// by then, and each of them gets the cluster itself as its Applier.
	if err := n.buildCluster(&cleanup); err != nil {
		return nil, err
	}
	if err := n.buildServices(); err != nil {
		return nil, err
	}
	if err := n.buildMail(); err != nil {
		return nil, err
	}
	n.wireHooks()
	n.onLeadership()
	if err := n.cluster.Start(); err != nil {
		return nil, err
	}
	n.registerOpsMetrics()
	n.handler, n.admin = n.routes()
	return n, nil
}

// newNode checks cfg (with its defaults), makes the data directory and
// settles the node's id, and loads what the node reads from files before
// anything else: the KEK and the TLS pair.
func newNode(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	id, err := nodeID(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	cfg.NodeID = id
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", id), registry: prometheus.NewRegistry(), serveErr: make(chan error, 2),
		closing: make(chan struct{})}
	n.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if n.kek, err = loadKEK(cfg.KEKFile, cfg.Demo, n.log); err != nil {
		return nil, err
	}
	if cfg.TLSCert != "" {
		// A bad pair refuses to start, with the files named.
		if n.certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey, n.log); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// openState opens the state file (closed again if New fails later).
func (n *Node) openState(cleanup *undo.Stack) (err error) {
	n.fsm, err = fsm.Open(filepath.Join(n.cfg.DataDir, "state.db"))
	if err != nil {
		return damaged(err, n.cfg.DataDir)
	}
	cleanup.Push(func() { n.fsm.Close() })
	return nil
}

// buildCluster builds raft, the transport and gossip around the FSM, not
// yet started (shut down again if New fails later).
func (n *Node) buildCluster(cleanup *undo.Stack) error {
	cfg := n.cfg
	// The request-rate limits hold for the cluster as a whole: every
	// node asks the leader, whose window alone counts (cluster.RateLimiter).
	window, err := ratelimit.Parse(cfg.RateLimit, cfg.Now)
	if err != nil {
		return err
	}
	var leaderLimiter ratelimit.Limiter
	if window != nil {
		leaderLimiter = window
	}
	key, err := nodeClusterKey(&cfg)
	if err != nil {
		return err
	}
	n.clusterKey = key
	httpAddr := cfg.HTTPAddr
	if cfg.HTTPListener != nil {
		httpAddr = cfg.HTTPListener.Addr().String()
	}
	var peers []raft.Server
	for _, p := range cfg.StaticPeers {
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	n.cluster, err = cluster.New(cluster.Config{
		Now:              cfg.Now,
		NodeID:           cfg.NodeID,
		DataDir:          cfg.DataDir,
		RaftAddr:         cfg.RaftAddr,
		RaftListener:     cfg.RaftListener,
		Dial:             cfg.Dial,
		ApplyTimeout:     applyTimeout,
		BootstrapPeers:   peers,
		Transport:        cluster.TransportConfig{ClusterKey: key},
		Gossip:           cluster.GossipConfig{Addr: cfg.GossipAddr, Join: cfg.Join, HTTPAddr: httpAddr, Version: cfg.Version},
		BootstrapExpect:  cfg.BootstrapExpect,
		NonVoter:         cfg.NonVoter,
		FSM:              n.fsm,
		RateLimiter:      leaderLimiter,
		Logger:           n.log,
		Registerer:       n.registry,
		HeartbeatTimeout: cfg.HeartbeatTimeout,
		ElectionTimeout:  cfg.ElectionTimeout,
		LeaderLease:      cfg.LeaderLease,

		SnapshotThreshold: cfg.SnapshotThreshold,
		SnapshotInterval:  cfg.SnapshotInterval,
		TrailingLogs:      cfg.TrailingLogs,
		RetainSnapshots:   cfg.RetainSnapshots,
	})
	if err != nil {
		return damaged(err, cfg.DataDir)
	}
	cleanup.Push(func() { n.cluster.Shutdown() })
	return nil
}

// buildServices builds the domain services over the state and the
// cluster: the signing keys, logout, the provider and the directory sync.
func (n *Node) buildServices() (err error) {
	cfg := n.cfg
	// The key manager caches parsed keys and the JWKS bytes; the FSM tells
	// it when the key set changes (onApply).
	n.keys = keys.New(keys.Config{
		State:       n.fsm.State(),
		Applier:     n.cluster,
		Now:         cfg.Now,
		Logger:      n.log,
		PublishLead: cfg.KeyPublishLead,
		Retention:   cfg.KeyRetention,
		RotateEvery: cfg.KeyRotation,
		KEK:         n.kek,
	})
	// One browser session (cookies, sealer, browser key) for oidc, signin
	// and logout.
	n.sessions, err = session.New(session.Config{
		Issuer: cfg.Issuer, State: n.fsm.State(), KEK: n.kek, Idle: cfg.SessionIdle, Max: cfg.SessionMax,
	})
	if err != nil {
		return err
	}
	// Refuse to start on secrets this node cannot open (no --kek-file, or
	// another one than the one they were sealed under).
	if err := n.checkSecrets(); err != nil {
		return err
	}
	ui, err := webui.New()
	if err != nil {
		return err
	}
	n.federation = federation.NewClient(federation.Options{Now: cfg.Now, Logger: n.log.With("component", "federation")})
	n.logout, err = logout.New(logout.Config{
		Issuer:        cfg.Issuer,
		State:         n.fsm.State(),
		Applier:       n.cluster,
		Keys:          n.keys,
		UI:            ui,
		Frame:         func(r *http.Request, clientID string) webui.Frame { return n.signin.Frame(r, clientID, "") },
		Now:           cfg.Now,
		Logger:        n.log,
		Registerer:    n.registry,
		Sessions:      n.sessions,
		ReadIndex:     n.readIndex,
		AdminClientID: oidc.AdminClientID,
		Upstreams:     n.federation,
	})
	if err != nil {
		return err
	}
	n.hasher = password.New(cfg.PasswordParams, runtime.GOMAXPROCS(0))
	if err := n.newProvider(ui); err != nil {
		return err
	}
	n.dirSync, err = directory.NewSyncer(directory.SyncConfig{
		State: n.fsm.State(), Applier: n.cluster, KEK: n.kek, Now: cfg.Now, Node: cfg.NodeID, Logger: n.log, Registerer: n.registry,
	})
	return err
}

// newProvider builds the interactive sign-in (with /account) and the OIDC
// provider that calls it through oidc.Steps: picker, consent, tokens.
func (n *Node) newProvider(ui *webui.UI) (err error) {
	cfg := n.cfg
	n.signin, err = signin.New(signin.Config{
		Issuer:          cfg.Issuer,
		State:           n.fsm.State(),
		Applier:         n.cluster,
		UI:              ui,
		Hasher:          n.hasher,
		Now:             cfg.Now,
		Logger:          n.log,
		Registerer:      n.registry,
		Sessions:        n.sessions,
		ReadIndex:       n.readIndex,
		KEK:             n.kek,
		Mail:            cfg.MailEnabled(),
		Federation:      n.federation,
		UpstreamSignOut: n.logout.UpstreamSignOut,
		SMS: sms.New(cfg.SMSOutbox, cfg.SMSWebhook, func(err error) {
			n.log.Error("text message not sent", "err", err)
		}),
	})
	if err != nil {
		return err
	}
	n.provider, err = oidc.New(oidc.Config{
		Issuer:      cfg.Issuer,
		State:       n.fsm.State(),
		Applier:     n.cluster,
		Keys:        n.keys,
		UI:          ui,
		Steps:       n.signin,
		Now:         cfg.Now,
		Logger:      n.log,
		Registerer:  n.registry,
		Sessions:    n.sessions,
		RateLimit:   cfg.RateLimit,
		RateLimiter: n.cluster.RateLimiter(),
		ReadIndex:   n.readIndex,
		AdminACR:    cfg.AdminACR,
		// The console's callback on the admin listener, when it is there.
		AdminRedirectURIs: n.adminCallbacks,
	})
	return err
}

// wireHooks connects the FSM's hooks: applied commands, a full disk, and
// the audit trail's metrics.
func (n *Node) wireHooks() {
	n.fsm.OnApply = n.onApply
	n.initDiskFull()
	n.fsm.OnDiskFull = n.onDiskFull
	n.fsm.OnHalt = n.onHalt
	n.initAudit()
	n.initTrail()
}

// ErrNewerFormat: the node stopped, or would not start, because its data
// dir, a snapshot or a log entry holds a state format this version does
// not apply (the cluster runs a newer release). Nothing was changed;
// `oidcd serve` exits with ExitNeedsUpgrade.
var ErrNewerFormat = fsm.ErrNewerFormat

// onHalt hears that the state machine stopped before an entry or a
// snapshot of a newer format: the node stops (Done delivers the error),
// and its state file stays where it was, for the newer build to go on.
func (n *Node) onHalt(err error) {
	n.log.Error("stopping: the cluster runs a newer state format than this version applies; upgrade this node", "error", err)
	select {
	case n.serveErr <- err:
	default:
	}
}

// onLeadership registers the leader's own work, each run while this node
// leads: key rotation, the first leader's bootstrap, the reap, the
// back-channel sender and the directory sync. Their audit events name
// this node.
func (n *Node) onLeadership() {
	cfg := n.cfg
	system := func(run func(context.Context)) func(context.Context) {
		return func(ctx context.Context) { run(fsm.WithAuditBase(ctx, fsm.AuditBase{Node: cfg.NodeID})) }
	}
	n.cluster.OnLeader(system(n.keys.Run))
	n.cluster.OnLeader(system(n.bootstrapOnce))
	n.cluster.OnLeader(system(fsm.Reaper{
		Applier: n.cluster, Now: cfg.Now, Every: cfg.ReapEvery, Grace: cfg.ReapGrace, AuditRetention: cfg.AuditRetention,
		Skew:   func() (time.Duration, bool) { return n.cluster.ClockSkew(), n.cluster.ClockSkewed() },
		Logger: n.log,
	}.Run))
	n.cluster.OnLeader(system(n.logout.RunSender))
	n.cluster.OnLeader(system(n.mail.Run))
	n.cluster.OnLeader(system(n.dirSync.Run))
}

// nodeID returns the configured id, else the one stored in dataDir, else a
// fresh one that is stored for every later start.
func nodeID(dataDir, configured string) (string, error) {
	path := filepath.Join(dataDir, "node-id")
	// #nosec G304 -- path is <data-dir>/node-id; the operator names the data directory
	stored, err := os.ReadFile(path)
	switch {
	case err == nil:
		s := strings.TrimSpace(string(stored))
		if configured != "" && configured != s {
			return "", fmt.Errorf("--node-id %q differs from %q stored in %s", configured, s, path)
		}
		return s, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	id := configured
	if id == "" {
		id = uuid.NewString()
	}
	return id, os.WriteFile(path, []byte(id+"\n"), 0o600)
}

// separateAdmin reports whether the admin surface has its own listener.
func (n *Node) separateAdmin() bool { return n.cfg.AdminAddr != "" || n.cfg.AdminListener != nil }

// routes builds the public surface and, with --admin-addr, the admin
// surface apart (the admin API, the console, /metrics; nil otherwise,
// when they are on the public listener).
func (n *Node) routes() (public, adminSurface http.Handler) {
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/openid-configuration", oidc.DiscoveryHandler(n.cfg.Issuer))
	mux.Handle("GET /.well-known/jwks.json", oidc.JWKSHandler(n.keys, n.log))
	n.provider.Register(mux)
	n.signin.Register(mux)
	n.logout.Register(mux)
	n.health(mux)
	mux.HandleFunc("GET /openapi.json", serveDocument(docs.OIDC))
	adminMux := mux
	if n.separateAdmin() {
		adminMux = http.NewServeMux()
		n.health(adminMux)
		adminElsewhere(mux)
	}
	// The console calls an in-process instance of the same admin API.
	adminCfg := admin.Config{
		State:     n.fsm.State(),
		Applier:   n.cluster,
		Keys:      adminKeys{n.keys},
		Cluster:   adminCluster{n},
		Hasher:    n.hasher,
		Now:       n.cfg.Now,
		Logger:    n.log,
		TokenHash: n.adminTokenHash,
		Node:      n.adminNodeInfo,
		KEK:       n.kek,
		OnVerify:  n.auditVerified,
		Issuer:    n.cfg.Issuer,
		Mail:      n.cfg.MailEnabled(),
		ReadIndex: n.readIndex,
		// People administer with the built-in client's tokens, signed in
		// at least as strongly as --admin-acr.
		People:   adminPeople{n.provider},
		AdminACR: n.cfg.AdminACR,
		// One guard for every route that takes an admin credential: the
		// API and the console's token form count guesses together.
		Guard: admin.NewGuard(n.cfg.Now),
	}
	adminMux.Handle("/admin/v1/", admin.New(adminCfg))
	// The admin API's description needs no token: it is the same
	// document the repository ships.
	adminMux.HandleFunc("GET /admin/v1/openapi.json", serveDocument(docs.Admin))
	adminMux.Handle(console.Prefix, console.New(console.Config{Admin: adminCfg, Issuer: n.cfg.Issuer, OwnListener: n.separateAdmin(), Secret: n.consoleSecret(),
		// A person's code is redeemed in process at this node's token
		// endpoint, counted against the browser's address.
		Exchange:   console.ExchangeVia(mux),
		BrowserKey: n.sessions.BrowserKey,
	}))
	adminMux.Handle("GET /metrics", promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{}))
	trusted, _ := httpx.ParseTrustedProxies(n.cfg.TrustedProxies) // validated in New
	way, _ := httpx.ParseProxyHeader(n.cfg.ProxyHeader)
	wrap := func(h http.Handler) http.Handler {
		return httpx.TrustedProxies(trusted, way)(httpx.Recover(n.log)(httpx.CorrelationWith(n.auditBase)(h)))
	}
	if n.separateAdmin() {
		return wrap(mux), wrap(adminMux)
	}
	return wrap(mux), nil
}

// health registers /healthz and /readyz on mux.
func (n *Node) health(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", n.handleReadyz)
}

// onApply runs on the FSM goroutine after each applied batch: each
// package that reacts to applied commands decides which (keys, logout,
// the admin token note). It must not block.
func (n *Node) onApply(types []fsm.Type) {
	n.keys.OnApply(types)
	n.provider.OnApply(types) // the CORS origins
	n.adminTokenApplied(types)
	n.logout.OnApply(types)
	n.mail.OnApply(types)
	n.trailApplied()
}

// Bounds of the cluster calls a request waits for: a node cut off from the
// leader answers 503 within these instead of holding the browser or the
// relying party.
const (
	applyTimeout     = 5 * time.Second
	readIndexTimeout = 3 * time.Second
)

// readIndex waits until this node has applied every write acknowledged
// anywhere before the call (see cluster.ReadIndex), for at most
// readIndexTimeout.
func (n *Node) readIndex(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readIndexTimeout)
	defer cancel()
	return n.cluster.ReadIndex(ctx)
}

// Start listens (unless a listener was given) and serves HTTP in the
// background.
func (n *Node) Start() error {
	ln := n.cfg.HTTPListener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", n.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http listener: %w", err)
		}
	}
	if way, _ := httpx.ParseProxyHeader(n.cfg.ProxyHeader); way == httpx.ProxyProtocol {
		// Only the public listener: balancers stand in front of it. The
		// admin listener is reached directly and names its peer.
		trusted, _ := httpx.ParseTrustedProxies(n.cfg.TrustedProxies) // validated in New
		ln = httpx.ProxyProtocolListener(ln, trusted)
	}
	n.listener = ln
	if n.cfg.PprofAddr != "" {
		p, err := startPprof(n.cfg.PprofAddr, n.log)
		if err != nil {
			ln.Close()
			return err
		}
		n.pprof = p
	}
	n.server = n.httpServer(n.handler)
	go n.catchUpOnce()
	go n.notifyReady()
	go n.auditVerifyLoop()
	go n.trailLoop()
	if n.certs != nil {
		var ctx context.Context
		ctx, n.stopWatch = context.WithCancel(context.Background())
		go n.certs.watch(ctx)
	}
	if n.admin != nil {
		aln := n.cfg.AdminListener
		if aln == nil {
			var err error
			if aln, err = net.Listen("tcp", n.cfg.AdminAddr); err != nil {
				ln.Close()
				n.pprof.close()
				return fmt.Errorf("admin listener: %w", err)
			}
		}
		n.adminLn, n.adminSrv = aln, n.httpServer(n.admin)
		go n.serve(n.adminSrv, aln)
		n.log.Info("serving the admin API, the console and /metrics", "admin", aln.Addr().String())
	}
	go func() {
		err := n.serve(n.server, ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		n.serveErr <- err
	}()
	n.log.Info("serving", "http", ln.Addr().String(), "issuer", n.cfg.Issuer, "raft", n.cluster.RaftAddr())
	return nil
}

// serve serves srv on ln: HTTPS (with HTTP/2) when the node has TLS.
func (n *Node) serve(srv *http.Server, ln net.Listener) error {
	if n.certs != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// httpServer is a server of h with the node's timeouts and limits.
func (n *Node) httpServer(h http.Handler) *http.Server {
	var tc *tls.Config
	if n.certs != nil {
		tc = n.certs.tlsConfig()
	}
	return &http.Server{
		TLSConfig:         tc,
		Handler:           h,
		ReadHeaderTimeout: orDefault(n.cfg.HTTPReadHeaderTimeout, 5*time.Second),
		ReadTimeout:       orDefault(n.cfg.HTTPReadTimeout, 15*time.Second),
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
}

// AdminAddr is the admin listener's address ("" without --admin-addr).
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}

// Done delivers the HTTP server's terminal error (nil after Close), or
// the error that stopped the state machine (ErrNewerFormat).
func (n *Node) Done() <-chan error { return n.serveErr }

// Close stops HTTP gracefully, then raft, then the state file.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.closing)
		done := make(chan error, 1)
		go func() { done <- n.close() }()
		select {
		case n.closeErr = <-done:
		case <-time.After(CloseBound):
			n.closeErr = fmt.Errorf("%w within %s; giving up on it", ErrCloseTimedOut, CloseBound)
			n.log.Error("close did not finish in time", "bound", CloseBound)
		}
	})
	return n.closeErr
}

// CloseBound is the longest Close takes, whatever is in flight.
const CloseBound = 10 * time.Second

// ErrCloseTimedOut: Close gave up after CloseBound, leaving part of the
// node still stopping (a bug: every step of close is bounded).
var ErrCloseTimedOut = errors.New("node: close did not finish")

// close stops the node in an order where nothing waits on what already
// stopped. The HTTP servers drain first while raft still runs, so the
// requests in flight (a token exchange that writes, a forwarded write)
// finish normally: after a drain no new ones arrive. Whatever is still
// running after closeGrace waits on raft that cannot answer (no quorum, a
// leader gone): the cluster is then marked stopping, so those requests
// answer 503 at once, and after a last second their connections are
// closed. Then raft and the stores.
func (n *Node) close() error {
	n.pprof.close()
	if n.stopWatch != nil {
		n.stopWatch()
	}
	var servers []*http.Server
	for _, srv := range []*http.Server{n.server, n.adminSrv} {
		if srv != nil {
			servers = append(servers, srv)
		}
	}
	drained := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace+time.Second)
	defer cancel()
	go func() {
		defer close(drained)
		var wg sync.WaitGroup
		for _, srv := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if srv.Shutdown(ctx) != nil {
					srv.Close()
				}
			}()
		}
		wg.Wait()
	}()
	select {
	case <-drained:
		// Peers' requests forwarded here (this node led until the drain
		// handed over) finish too, with raft still running.
		qctx, qcancel := context.WithTimeout(context.Background(), quiesceBound)
		n.cluster.Quiesce(qctx)
		qcancel()
	case <-time.After(closeGrace):
		n.log.Warn("requests still in flight at close; answering them 503", "after", closeGrace)
		n.cluster.Stop()
		<-drained
	}
	n.cluster.Stop()
	if n.trail != nil && n.server != nil {
		<-n.trail.done // started with the node; stops with n.closing
	}
	return errors.Join(n.cluster.Shutdown(), n.fsm.Close())
}

// closeGrace is how long Close lets requests in flight finish with raft
// still running.
const closeGrace = 4 * time.Second

// quiesceBound is how long Close then lets peers' forwarded requests
// finish (closeGrace, this and raft's shutdown stay within CloseBound).
const quiesceBound = 2 * time.Second

// Handler is the node's complete HTTP surface.
func (n *Node) Handler() http.Handler { return n.handler }

// Addr is the HTTP listener's address (after Start).
func (n *Node) Addr() string { return n.listener.Addr().String() }

// Issuer is the node's issuer URL.
func (n *Node) Issuer() string { return n.cfg.Issuer }

// Cluster exposes raft for tests and the cluster tooling.
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }

// FSM exposes the state machine for tests.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Keys exposes the signing keys.
func (n *Node) Keys() *keys.Manager { return n.keys }

// MaxHeaderBytes caps the request line and headers of the HTTP listener;
// a larger request is answered 431.
const MaxHeaderBytes = 32 << 10

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// KEK is the key-encryption key loaded from --kek-file (nil without one;
// a nil *kek.KEK is valid and stores secrets in kek's clear form).
func (n *Node) KEK() *kek.KEK { return n.kek }

// DataDir is where this node keeps its files.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// ID is the node's stable raft id.
func (n *Node) ID() string { return n.cfg.NodeID }

// AdminTokenFile is where a generated admin token is written.
func (n *Node) AdminTokenFile() string { return filepath.Join(n.cfg.DataDir, "admin-token") }

// adminTokenHash is the hash of the one admin token the admin API accepts:
// the replicated one, wherever it came from (the break-glass token lives in
// the state), so every node accepts the same token and a restore brings back
// the backup's. While the state holds none (before the first leader seeds
// it, or in a cluster upgraded from a version that did not replicate
// --admin-token, until an upgraded leader does), this node's own
// --admin-token works, so neither a new node nor a rolling upgrade locks
// anyone out.
func (n *Node) adminTokenHash() string {
	h, err := n.fsm.State().AdminTokenHash()
	if err != nil {
		return "" // a read error lets nobody in
	}
	if h == "" && n.cfg.AdminToken != "" {
		return admin.HashToken(n.cfg.AdminToken)
	}
	return h
}

// consoleSecret keys the console's session fingerprint with what every
// node holds and the replicated state does not: the cluster key, and the
// KEK when one is set. A copy of the state alone cannot forge a console
// session, and adopting a KEK ends every console session.
func (n *Node) consoleSecret() []byte {
	m := hmac.New(sha256.New, []byte("oidcd console session v1"))
	m.Write(n.clusterKey)
	m.Write(n.kek.Derive("oidcd console session v1"))
	return m.Sum(nil)
}

// auditBase gives every request the audit base of its events: this node
// and the client's address as --trusted-proxies decides it.
func (n *Node) auditBase(ctx context.Context, r *http.Request) context.Context {
	ip := httpx.ClientAddr(r)
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	return fsm.WithAuditBase(ctx, fsm.AuditBase{Node: n.cfg.NodeID, IP: ip})
}

// damaged adds the way back to a damaged file's error: the node's copy is
// rebuilt from the others.
func damaged(err error, dataDir string) error {
	if !errors.Is(err, fsm.ErrDamaged) {
		return err
	}
	return fmt.Errorf("%w\nthis node's copy cannot be trusted. In a cluster: move %s aside, start the node again with the same --node-id and --join (or peers); "+
		"it rejoins and catches up from the others (a snapshot). A single node: restore a backup (oidcd admin snapshot restore) on a fresh data directory", err, dataDir)
}

// serveDocument serves a static JSON document (the OpenAPI descriptions).
func serveDocument(doc []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Write(doc)
	}
}
