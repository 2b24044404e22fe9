package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// bench is one run: what was provisioned, the shared connection pool and
// verifier, and the recorders.
type bench struct {
	cfg      *config
	sc       *scenario
	w        *world
	tr       *http.Transport
	rp       *http.Client // the relying parties' side: no cookies, no redirects
	verifier *oidc.IDTokenVerifier
	paths    paths
	fed      *federationRun // federated-signin's upstream, nil for the others

	rr      atomic.Uint64 // round robin over the targets
	people  atomic.Uint64 // round robin over the people of fresh sign-ins
	tickets atomic.Int64  // operations started, against --requests

	total *recorder
	per   map[string]*recorder // by scenario, for mixed

	// The last verified body of each static document (callStatic).
	discoveryBody, jwksBody, trivialBody atomic.Pointer[[]byte]
}

// paths are the endpoint paths of the discovery document, relative to the
// issuer, so that they can be sent to any target.
type paths struct {
	authorize, token, userinfo, introspect, jwks string
}

// pick returns the target of the next operation and, for a sign-in, the
// target of its exchange: the next one, as a balancer would spread them.
func (b *bench) pick() (at, ex string) {
	n := b.rr.Add(1) - 1
	t := b.cfg.targets
	return t[n%uint64(len(t))], t[(n+1)%uint64(len(t))]
}

// nextPerson spreads fresh sign-ins over the provisioned people.
func (b *bench) nextPerson() person {
	n := b.people.Add(1) - 1
	return b.w.people[n%uint64(len(b.w.people))]
}

// ticket reports whether another operation may start under --requests.
func (b *bench) ticket() bool {
	return b.cfg.requests == 0 || b.tickets.Add(1) <= b.cfg.requests
}

func (b *bench) ok(name string, d time.Duration) {
	b.total.ok(d)
	if r := b.per[name]; r != nil {
		r.ok(d)
	}
}

func (b *bench) fail(name, kind string, err error) {
	b.total.fail(kind, err.Error())
	if r := b.per[name]; r != nil {
		r.fail(kind, err.Error())
	}
}

// oauthConfig is the public client's relying party with its browser sent
// to target at and its token exchange to target ex.
func (b *bench) oauthConfig(at, ex string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:    b.w.publicID,
		RedirectURL: redirectURI,
		Scopes:      []string{oidc.ScopeOpenID, "email", "profile"},
		Endpoint: oauth2.Endpoint{
			AuthURL: at + b.paths.authorize, TokenURL: ex + b.paths.token,
			AuthStyle: oauth2.AuthStyleInParams, // a public client has no secret to send
		},
	}
}

// readAll reads a whole answer of at most maxBody bytes, in one
// allocation when the length is announced.
func readAll(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= maxBody {
		b := make([]byte, n)
		_, err := io.ReadFull(resp.Body, b)
		return b, err
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxBody))
}

// discover reads the discovery document of the first target as a relying
// party would, checks that it names cfg.issuer, and returns the endpoint
// paths and the key set that verifies ID tokens. The JWKS is fetched
// from the first target even when the issuer is another address (a
// balancer), so the tool never dials the issuer itself.
func discover(ctx context.Context, cfg *config, hc *http.Client) (paths, oidc.KeySet, error) {
	// The issuer may differ from the target's own address (a balancer in
	// front of the cluster): compare it below, not in go-oidc.
	pctx := oidc.InsecureIssuerURLContext(oidc.ClientContext(ctx, hc), cfg.issuer)
	p, err := oidc.NewProvider(pctx, cfg.targets[0])
	if err != nil {
		return paths{}, nil, fmt.Errorf("discovery on %s: %w", cfg.targets[0], err)
	}
	var d struct {
		Issuer     string `json:"issuer"`
		Authorize  string `json:"authorization_endpoint"`
		Token      string `json:"token_endpoint"`
		Userinfo   string `json:"userinfo_endpoint"`
		Introspect string `json:"introspection_endpoint"`
		JWKS       string `json:"jwks_uri"`
	}
	if err := p.Claims(&d); err != nil {
		return paths{}, nil, err
	}
	if d.Issuer != cfg.issuer {
		return paths{}, nil, fmt.Errorf("%s serves issuer %q, not %q: pass --issuer %s", cfg.targets[0], d.Issuer, cfg.issuer, d.Issuer)
	}
	var ps paths
	var bad []string
	for _, e := range []struct {
		dst      *string
		uri, def string
	}{
		{&ps.authorize, d.Authorize, "/authorize"},
		{&ps.token, d.Token, "/oauth2/token"},
		{&ps.userinfo, d.Userinfo, "/userinfo"},
		{&ps.introspect, d.Introspect, "/oauth2/introspect"},
		{&ps.jwks, d.JWKS, "/.well-known/jwks.json"},
	} {
		switch rest, ok := strings.CutPrefix(e.uri, cfg.issuer); {
		case e.uri == "":
			*e.dst = e.def
		case ok && strings.HasPrefix(rest, "/"):
			*e.dst = rest
		default:
			bad = append(bad, e.uri)
		}
	}
	if len(bad) > 0 {
		return paths{}, nil, fmt.Errorf("discovery: endpoints outside the issuer %s: %s", cfg.issuer, strings.Join(bad, ", "))
	}
	// The key set outlives any one operation: its context is the run's,
	// without the deadline, so a late key fetch is not cancelled.
	return ps, oidc.NewRemoteKeySet(oidc.ClientContext(context.WithoutCancel(ctx), hc), cfg.targets[0]+ps.jwks), nil
}

// env is what consecutive runs against the same nodes share: the
// connection pool, the endpoint paths, the key set and what was
// provisioned. The matrix provisions once per set of nodes and runs every
// scenario on one env.
type env struct {
	tr   *http.Transport
	rp   *http.Client // the relying parties' side: no cookies, no redirects
	adm  *admin
	ps   paths
	keys oidc.KeySet
	w    *world // nil for the trivial handler
}

// newEnv is an env with a connection pool and nothing provisioned.
func newEnv(cfg *config) *env {
	tr := newTransport(cfg.concurrency)
	return &env{tr: tr, rp: &http.Client{Transport: tr, CheckRedirect: noRedirect}}
}

// prepare discovers the first target's endpoints and provisions an
// organization, people and clients. The caller runs cleanup once it is
// done with e, also after an error: it removes what was provisioned
// (unless --keep) and closes the connections.
func prepare(ctx context.Context, cfg *config, stderr io.Writer) (*env, func(), error) {
	e := newEnv(cfg)
	e.adm = &admin{base: cfg.targets[0] + "/admin/v1", token: cfg.adminToken, hc: e.rp}
	var w *world
	cleanup := func() {
		defer e.tr.CloseIdleConnections()
		if w == nil || cfg.keep {
			return
		}
		// Also after Ctrl-C: the run's context is gone, the clean-up is not.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if err := unprovision(cctx, e.adm, w); err != nil {
			logf(stderr, "warning: %v", err)
		}
	}
	var err error
	if e.ps, e.keys, err = discover(ctx, cfg, e.rp); err != nil {
		return nil, cleanup, err
	}
	if w, err = provision(ctx, e.adm, cfg.users, cfg.tokenTTL); err != nil {
		return nil, cleanup, fmt.Errorf("provisioning through %s: %w", e.adm.base, err)
	}
	e.w = w
	if cfg.preload > 0 {
		if err := preload(ctx, e.adm, w, cfg.preload, stderr); err != nil {
			return nil, cleanup, err
		}
	}
	logf(stderr, "provisioned organization %s: %d people, public client %s, confidential client %s",
		w.slug, len(w.people), w.publicID, w.confID)
	return e, cleanup, nil
}

// execute provisions, signs the workers in, runs the load and returns the
// report; cleanup is prepare's.
func execute(ctx context.Context, cfg *config, stderr io.Writer) (rep *report, cleanup func(), err error) {
	e, cleanup, err := prepare(ctx, cfg, stderr)
	if err != nil {
		return nil, cleanup, err
	}
	rep, err = load(ctx, cfg, e, stderr)
	return rep, cleanup, err
}

// load signs the workers in (outside the timing), runs cfg.scenario on e
// until the duration or the request count is spent and returns the
// report.
func load(ctx context.Context, cfg *config, e *env, stderr io.Writer) (*report, error) {
	sc := lookupScenario(cfg.scenario)
	if sc == nil {
		return nil, fmt.Errorf("no scenario %q", cfg.scenario)
	}
	b := &bench{cfg: cfg, sc: sc, w: e.w, tr: e.tr, rp: e.rp, paths: e.ps,
		total: newRecorder(), per: map[string]*recorder{}}
	if e.w != nil {
		b.verifier = oidc.NewVerifier(cfg.issuer, e.keys, &oidc.Config{ClientID: e.w.publicID})
	}
	if b.sc.name == mixedName {
		for _, m := range mixedWeights {
			b.per[m.name] = newRecorder()
		}
	}

	if sc.federated {
		if e.w == nil {
			return nil, fmt.Errorf("%s needs provisioned people", sc.name)
		}
		fed, err := startFederation(ctx, cfg, e, b, stderr)
		if fed != nil {
			defer fed.close(ctx, stderr)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
	}

	workers := make([]*worker, cfg.concurrency)
	for i := range workers {
		workers[i] = &worker{b: b, needSession: true,
			rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))}
		if e.w != nil {
			workers[i].p = e.w.people[i%len(e.w.people)]
		}
	}
	if b.sc.needsSession || b.sc.needsToken {
		logf(stderr, "signing in %d workers", len(workers))
		err := parallel(ctx, len(workers), 8, func(ctx context.Context, i int) error {
			return workers[i].prepare(ctx, b.sc)
		})
		if err != nil {
			return nil, fmt.Errorf("signing the workers in: %w", err)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.duration > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(runCtx, cfg.duration)
		defer stop()
	}
	var soak *soakProbe
	if cfg.soak {
		soak = startSoak(runCtx, cfg)
	}
	logf(stderr, "running %s on %s: %d workers, %s", cfg.scenario, strings.Join(cfg.targets, ", "), cfg.concurrency, bound(cfg))
	if cfg.onStart != nil {
		cfg.onStart()
	}
	start := time.Now()
	var progress sync.WaitGroup
	if soak != nil && cfg.reportInterval > 0 {
		progress.Add(1)
		go func() {
			defer progress.Done()
			soak.progress(runCtx, stderr, b.total, start, cfg.reportInterval)
		}()
	}
	var wg sync.WaitGroup
	for _, wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk.loop(runCtx)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cancel()
	progress.Wait()

	rep := &report{
		Scenario: cfg.scenario, Targets: cfg.targets, Issuer: cfg.issuer, Concurrency: cfg.concurrency,
		DurationS: float64(elapsed.Round(time.Millisecond)) / float64(time.Second),
		stats:     b.total.stats(elapsed), samples: b.total.sampleErrors(),
	}
	if len(b.per) > 0 {
		rep.Scenarios = map[string]stats{}
		for name, r := range b.per {
			rep.Scenarios[name] = r.stats(elapsed)
		}
	}
	if soak != nil {
		rep.Soak = soak.finish()
	}
	if b.fed != nil {
		rep.Federation = b.fed.finish(ctx, rep, stderr)
	}
	return rep, nil
}

// bound describes what ends the run.
func bound(cfg *config) string {
	switch {
	case cfg.requests > 0 && cfg.duration > 0:
		return fmt.Sprintf("%s or %d operations", cfg.duration, cfg.requests)
	case cfg.requests > 0:
		return fmt.Sprintf("%d operations", cfg.requests)
	default:
		return cfg.duration.String()
	}
}
