package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/net/html"
	"golang.org/x/oauth2"
)

// The federated-signin scenario: a sign-in at the targets (the
// downstream) through another oidcd (the upstream), the flow of
// node/federation_hq_test.go. Before the clock starts the tool starts the
// upstream itself, a single-node `oidcd-bench nodes` process with its own
// data directory and port, and provisions there the people of the run
// (their addresses and passwords) and a confidential client for the
// downstream; the downstream gets the identity provider upstreamSlug,
// authoritative for the people's domain. One operation is a fresh browser
// sent by the public client to the downstream's /authorize with the
// person's address as login_hint, redirected to the upstream, signing in
// there with the password, back through the downstream's callback to the
// client's redirect URI, then the client's code exchange at the
// downstream and the check of its ID token.
//
// The provider exists only while the scenario runs: it is authoritative
// for the domain of every person of the run, so while it is there a
// password typed at the downstream for one of them goes to the upstream
// too, and the other scenarios would measure something else.

const (
	federatedName = "federated-signin"
	// upstreamSlug is the downstream's identity provider of the scenario.
	upstreamSlug = "up"
	// fedMetric is the downstream's histogram of the time it waits on an
	// upstream at the callback (signin's fedMetrics): the token exchange,
	// the key set and userinfo.
	fedMetric = "oidcd_federation_upstream_seconds"
	// provisioningMode links the first sign-in of each person to the
	// person the downstream already has with that verified address, and
	// would create one that it has not.
	provisioningMode = "create_or_link"
)

// federationRun is what the scenario set up for one run, and what its
// operations add up.
type federationRun struct {
	up       *child  // the upstream's process
	upBase   string  // its base URL
	upHost   string  // hostKey of upBase
	downHost hostSet // the downstream: every target and the issuer
	adm      *admin  // the downstream's admin API
	idpID    string
	metrics  []string // the downstream's /metrics, one URL per node
	nodes    []*admin // the admin API of each downstream node

	// subs is each person's sub at the downstream, by address, found by
	// the warm-up sign-in; read-only afterwards.
	subs map[string]string
	// created are the people the warm-up created at the downstream (the
	// others it linked to who was there): deleted at the end.
	created []string
	warm    warmUp
	// linkedAt is when each person's link was made, by downstream sub,
	// read after the warm-up: a link made during the run shows as a
	// change.
	linkedAt map[string]time.Time
	before   histSample
	waitOK   bool // the downstream's /metrics were readable before the run

	// The operations that succeeded, added up.
	ops                      atomic.Uint64
	upNs, downNs, exNs       atomic.Int64
	upRequests, downRequests atomic.Uint64
}

// warmUp is what the first sign-in of each person did at the downstream.
type warmUp struct {
	People  int `json:"people"`
	Linked  int `json:"linked"`  // to the person the downstream had with that address
	Created int `json:"created"` // a new person at the downstream
}

// fedFigures are the federated sign-in's split, per operation, for the
// report: Total is the mean operation; Upstream the upstream's own time
// (the browser's requests to it, UpstreamBrowser, and the downstream
// waiting on it at the callback, UpstreamWait, the mean of the exchanges
// counted by fedMetric during the run); Own is Total less Upstream:
// oidcd's own time, the load generator's share of it included, as in
// every other scenario's latency.
type fedFigures struct {
	Provisioning      string  `json:"provisioning"`
	Warm              warmUp  `json:"warm_up"`
	LinksMadeInRun    int     `json:"links_made_during_run"` // 0: every timed sign-in found its link
	Ops               uint64  `json:"ops"`
	TotalMs           float64 `json:"total_ms"`
	UpstreamMs        float64 `json:"upstream_ms"`
	UpstreamBrowserMs float64 `json:"upstream_browser_ms"`
	UpstreamWaitMs    float64 `json:"upstream_wait_ms"`
	Exchanges         uint64  `json:"upstream_exchanges"` // fedMetric's count during the run
	WaitKnown         bool    `json:"upstream_wait_known"`
	OwnMs             float64 `json:"own_ms"`
	// The rest of Total, as the browser saw it: its requests to the
	// downstream (the callback's wait on the upstream among them) and the
	// client's exchange with the check of the ID token.
	DownstreamBrowserMs float64 `json:"downstream_browser_ms"`
	ExchangeMs          float64 `json:"exchange_ms"`
	UpstreamRequests    float64 `json:"upstream_requests_per_op"`
	DownstreamRequests  float64 `json:"downstream_requests_per_op"`
}

// fedTimes is one operation's requests, timed and split by host.
type fedTimes struct {
	up, down, exchange time.Duration
	upN, downN         int
}

// add counts one request of d to the upstream (up) or the downstream.
func (t *fedTimes) add(up bool, d time.Duration) {
	if up {
		t.up += d
		t.upN++
		return
	}
	t.down += d
	t.downN++
}

// record adds a successful operation.
func (f *federationRun) record(t fedTimes) {
	f.ops.Add(1)
	f.upNs.Add(int64(t.up))
	f.downNs.Add(int64(t.down))
	f.exNs.Add(int64(t.exchange))
	f.upRequests.Add(uint64(t.upN))
	f.downRequests.Add(uint64(t.downN))
}

// hostKey is the host and port of u as cookies and the split see a
// site: lowercase, the scheme's default port spelled out.
func hostKey(u *url.URL) string {
	host, port := strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}

// hostSet is a set of hostKeys.
type hostSet map[string]bool

func newHostSet(bases ...string) hostSet {
	s := hostSet{}
	for _, b := range bases {
		if u, err := url.Parse(b); err == nil && u.Host != "" {
			s[hostKey(u)] = true
		}
	}
	return s
}

func (s hostSet) has(u *url.URL) bool { return s[hostKey(u)] }

// siteJar is the federated browser's cookies: one jar for the upstream,
// one for the downstream. The two oidcds share 127.0.0.1 and the names of
// their cookies, and browsers keep cookies by host name, not port (the
// trap node/federation_hq_test.go describes): at a real site the two have
// names of their own. The downstream's nodes are one site, as behind a
// balancer, so a session cookie set by one node goes to the next.
type siteJar struct {
	upHost   string
	up, down *cookiejar.Jar
}

func newSiteJar(upHost string) *siteJar {
	up, _ := cookiejar.New(nil)
	down, _ := cookiejar.New(nil)
	return &siteJar{upHost: upHost, up: up, down: down}
}

func (j *siteJar) jar(u *url.URL) *cookiejar.Jar {
	if hostKey(u) == j.upHost {
		return j.up
	}
	return j.down
}

func (j *siteJar) SetCookies(u *url.URL, cs []*http.Cookie) { j.jar(u).SetCookies(u, cs) }
func (j *siteJar) Cookies(u *url.URL) []*http.Cookie        { return j.jar(u).Cookies(u) }

// newBrowser is a fresh federated browser.
func (f *federationRun) newBrowser(tr http.RoundTripper) *http.Client {
	return &http.Client{Transport: tr, Jar: newSiteJar(f.upHost), CheckRedirect: noRedirect}
}

func opFederatedSignIn(ctx context.Context, w *worker) error {
	f := w.b.fed
	at, ex := w.b.pick()
	p := w.b.nextPerson()
	t, _, err := w.b.federatedSignIn(ctx, f.newBrowser(w.b.tr), at, ex, p, f.subs[p.email])
	if err != nil {
		return err
	}
	f.record(t)
	return nil
}

// federatedSignIn runs a fresh browser through the federated sign-in of
// p: the public client's /authorize at target at with p's address as
// login_hint, the redirects between the downstream and the upstream, the
// upstream's password form, until the browser is sent to the redirect
// URI; then the exchange at target ex and the ID token's checks, its sub
// wantSub unless that is empty (the warm-up, which learns it). Every
// request is timed and counted on its side.
func (b *bench) federatedSignIn(ctx context.Context, hc *http.Client, at, ex string, p person, wantSub string) (fedTimes, string, error) {
	f := b.fed
	var t fedTimes
	verifier, state, nonce := oauth2.GenerateVerifier(), randomHex(12), randomHex(12)
	cfg := b.oauthConfig(at, ex)
	method, next, form := "GET", cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce),
		oauth2.SetAuthURLParam("login_hint", p.email)), url.Values(nil)
	var code string
	submitted := false
	for step := 0; code == ""; step++ {
		if step == 12 {
			return t, "", failf("too_many_steps", "federated sign-in did not end after %d requests", step)
		}
		u, err := url.Parse(next)
		if err != nil {
			return t, "", failf("bad_location", "%q: %v", next, err)
		}
		up := hostKey(u) == f.upHost
		began := time.Now()
		pg, err := fetch(ctx, hc, method, next, form)
		t.add(up, time.Since(began))
		if err != nil {
			return t, "", err
		}
		if loc := pg.location; loc != nil {
			switch {
			case isCallback(loc):
				if code, err = callbackCode(loc, state); err != nil {
					return t, "", err
				}
			case hostKey(loc) == f.upHost || f.downHost.has(loc):
				method, next, form = "GET", loc.String(), nil
			default:
				return t, "", failf("redirect_elsewhere", "%s redirected to %s", pg.url.Path, loc)
			}
			continue
		}
		side := "downstream"
		if up {
			side = "upstream"
		}
		if pg.status != http.StatusOK && pg.status != http.StatusBadRequest {
			return t, "", statusError(pg.status, pg.body, side+" "+pg.url.Path)
		}
		if !up {
			// The downstream only redirects in this flow: a page is its
			// sign-in form (the address did not go to the upstream) or an
			// error page (the upstream's answer failed a check).
			return t, "", failf("downstream_page", "status %d at %s: %s", pg.status, pg.url.Path, snippet(pg.body))
		}
		doc, err := html.Parse(bytes.NewReader(pg.body))
		if err != nil {
			return t, "", failf("bad_html", "%s: %v", pg.url.Path, err)
		}
		action, values, ok := findForm(doc, "method", "password")
		switch {
		case ok && submitted:
			return t, "", failf("upstream_signin_rejected", "the upstream's sign-in form came back with status %d", pg.status)
		case ok:
			submitted = true
			values.Set("email", p.email)
			values.Set("password", p.password)
			values.Set("method", "password")
			method, next, form = "POST", resolve(pg.url, action), values
		case pg.status == http.StatusBadRequest:
			return t, "", failf("400 upstream page", "error page at %s", pg.url.Path)
		default:
			return t, "", failf("unexpected_upstream_page", "status %d at %s", pg.status, pg.url.Path)
		}
	}
	began := time.Now()
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, b.rp), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return t, "", err
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return t, "", failf("no_id_token", "the token response has no id_token")
	}
	idt, err := b.verifier.Verify(ctx, raw)
	t.exchange = time.Since(began)
	if err != nil {
		if ctx.Err() != nil {
			return t, "", ctx.Err()
		}
		return t, "", failf("id_token_invalid", "%v", err)
	}
	switch {
	case idt.Nonce != nonce:
		return t, "", failf("nonce_mismatch", "got %q, want %q", idt.Nonce, nonce)
	case wantSub != "" && idt.Subject != wantSub:
		return t, "", failf("wrong_sub", "got %q, want %q (the person the warm-up found)", idt.Subject, wantSub)
	}
	return t, idt.Subject, nil
}

// startFederation starts the upstream, provisions it, registers it at
// the downstream, signs every person in once through it (outside the
// timing: the first sign-in makes the link, the run measures the everyday
// one that finds it) and reads the downstream's fedMetric. close undoes
// it, also after an error.
func startFederation(ctx context.Context, cfg *config, e *env, b *bench, stderr io.Writer) (*federationRun, error) {
	logLevel := cfg.upstreamLog
	if logLevel == "" {
		logLevel = "none"
	}
	logf(stderr, "starting the upstream oidcd for %s", federatedName)
	ch, err := spawnNodes(ctx, stderr, 90*time.Second, "--size", "1", "--log-level", logLevel)
	if err != nil {
		return nil, fmt.Errorf("the upstream: %w", err)
	}
	f := &federationRun{up: ch, adm: e.adm, downHost: newHostSet(append([]string{cfg.issuer}, cfg.targets...)...)}
	if len(ch.info.URLs) != 1 || ch.info.Issuer == "" {
		return f, fmt.Errorf("the upstream started as %+v, want one node", ch.info)
	}
	f.upBase = ch.info.URLs[0]
	u, _ := url.Parse(f.upBase)
	f.upHost = hostKey(u)
	if f.downHost.has(u) {
		return f, fmt.Errorf("the upstream %s is one of the targets", f.upBase)
	}
	upAdm := &admin{base: f.upBase + "/admin/v1", token: ch.info.AdminToken, hc: e.rp}
	clientID, secret, err := provisionUpstream(ctx, upAdm, e.w, cfg.issuer)
	if err != nil {
		return f, fmt.Errorf("provisioning the upstream %s: %w", f.upBase, err)
	}
	domain := emailDomain(e.w.people)
	var ip struct {
		ID          string `json:"id"`
		RedirectURI string `json:"redirect_uri"`
	}
	err = e.adm.do(ctx, "POST", "/identity-providers", map[string]any{
		"slug": upstreamSlug, "display_name": "oidcd-bench upstream", "issuer": ch.info.Issuer,
		"client_id": clientID, "client_secret": secret, "email_domains": []string{domain},
		"provisioning": provisioningMode, "memberships": map[string]any{"organization_id": e.w.orgID},
	}, &ip, 201)
	if err != nil {
		return f, fmt.Errorf("registering the upstream at the downstream: %w", err)
	}
	f.idpID = ip.ID
	if want := fedRedirectURI(cfg.issuer); ip.RedirectURI != want {
		return f, fmt.Errorf("the downstream's provider has redirect_uri %q, the upstream's client %q", ip.RedirectURI, want)
	}
	seen := map[string]bool{}
	for _, t := range cfg.targets {
		if !seen[t] {
			seen[t] = true
			f.metrics = append(f.metrics, t+"/metrics")
			f.nodes = append(f.nodes, &admin{base: t + "/admin/v1", token: e.adm.token, hc: e.adm.hc})
		}
	}
	// A node answers /authorize from its own copy of the state: the
	// provider must be on every one before a browser is sent there.
	if err := f.onEveryNode(ctx, 200); err != nil {
		return f, err
	}

	b.fed = f
	if err := f.warmUp(ctx, b, e.w.people, cfg.timeout); err != nil {
		return f, err
	}
	logf(stderr, "%s: the upstream %s holds %d people; each signed in once (%d linked to the person here, %d created), so the run finds the links",
		federatedName, f.upBase, f.warm.People, f.warm.Linked, f.warm.Created)
	var perr error
	if f.before, perr = f.readWait(ctx); perr != nil {
		logf(stderr, "warning: %s: no %s from the downstream (%v): the upstream's time will be the browser's alone", federatedName, fedMetric, perr)
	} else {
		f.waitOK = true
	}
	return f, nil
}

// onEveryNode reads the provider on every downstream node until each
// answers want (200: it is there, 404: it is gone). The admin API's reads
// are linearizable: an answer means the node has applied every write
// acknowledged before, so one read a node is enough.
func (f *federationRun) onEveryNode(ctx context.Context, want int) error {
	for _, a := range f.nodes {
		if err := a.do(ctx, "GET", "/identity-providers/"+f.idpID, nil, nil, want); err != nil {
			return fmt.Errorf("the provider on %s: %w", a.base, err)
		}
	}
	return nil
}

// fedRedirectURI is the downstream's callback of upstreamSlug.
func fedRedirectURI(issuer string) string {
	return issuer + "/federation/" + upstreamSlug + "/callback"
}

// emailDomain is the domain of the people's addresses (the tool gives
// them all one).
func emailDomain(people []person) string {
	if len(people) == 0 {
		return ""
	}
	_, d, _ := strings.Cut(people[0].email, "@")
	return d
}

// provisionUpstream creates at the upstream an organization, the people
// of w with their addresses (verified) and passwords, their memberships,
// and the downstream's confidential client, and returns its credentials.
func provisionUpstream(ctx context.Context, a *admin, w *world, downIssuer string) (clientID, secret string, err error) {
	var org struct{ ID string }
	if err := a.do(ctx, "POST", "/organizations", map[string]any{"slug": "up-" + w.slug, "name": "oidcd-bench upstream"}, &org, 201); err != nil {
		return "", "", err
	}
	err = parallel(ctx, len(w.people), 8, func(ctx context.Context, i int) error {
		p := w.people[i]
		var u struct{ ID string }
		if err := a.do(ctx, "POST", "/users", map[string]any{"email": p.email, "email_verified": true, "password": p.password}, &u, 201); err != nil {
			return err
		}
		return a.do(ctx, "POST", "/memberships", map[string]any{"user_id": u.ID, "org_id": org.ID}, nil, 201)
	})
	if err != nil {
		return "", "", err
	}
	var c struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := a.do(ctx, "POST", "/clients", map[string]any{"name": "oidcd-bench downstream", "type": "confidential",
		"organization_id": org.ID, "redirect_uris": []string{fedRedirectURI(downIssuer)},
		"scopes": []string{"openid", "email", "profile"}, "skip_consent": true}, &c, 201); err != nil {
		return "", "", err
	}
	if c.ClientSecret == "" {
		return "", "", fmt.Errorf("POST /clients: the confidential client came without a client_secret")
	}
	return c.ClientID, c.ClientSecret, nil
}

// warmUp signs every person in once through the upstream, four at once,
// learns their subs at the downstream and whether the sign-in linked them
// to who was there or created them, then reads when each link was made.
func (f *federationRun) warmUp(ctx context.Context, b *bench, people []person, timeout time.Duration) error {
	subs := make([]string, len(people))
	err := parallel(ctx, len(people), 4, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		at, ex := b.pick()
		_, sub, err := b.federatedSignIn(ctx, f.newBrowser(b.tr), at, ex, people[i], "")
		if err != nil {
			return fmt.Errorf("the first federated sign-in of %s: %w", people[i].email, err)
		}
		subs[i] = sub
		return nil
	})
	if err != nil {
		return err
	}
	f.subs = map[string]string{}
	f.warm = warmUp{People: len(people)}
	for i, p := range people {
		f.subs[p.email] = subs[i]
		if subs[i] == p.id {
			f.warm.Linked++
		} else {
			f.warm.Created++
			f.created = append(f.created, subs[i])
		}
	}
	f.linkedAt, err = f.links(ctx)
	return err
}

// links reads when each person's link to the upstream was made, by
// downstream sub; a person with other than one link is an error.
func (f *federationRun) links(ctx context.Context) (map[string]time.Time, error) {
	var mu sync.Mutex
	out := map[string]time.Time{}
	subs := make([]string, 0, len(f.subs))
	for _, s := range f.subs {
		subs = append(subs, s)
	}
	err := parallel(ctx, len(subs), 8, func(ctx context.Context, i int) error {
		var ids struct {
			Data []struct {
				ProviderID string    `json:"provider_id"`
				LinkedAt   time.Time `json:"linked_at"`
			} `json:"data"`
		}
		if err := f.adm.do(ctx, "GET", "/users/"+subs[i]+"/identities", nil, &ids, 200); err != nil {
			return err
		}
		var at []time.Time
		for _, id := range ids.Data {
			if id.ProviderID == f.idpID {
				at = append(at, id.LinkedAt)
			}
		}
		if len(at) != 1 {
			return fmt.Errorf("person %s has %d links to the upstream, want 1", subs[i], len(at))
		}
		mu.Lock()
		out[subs[i]] = at[0]
		mu.Unlock()
		return nil
	})
	return out, err
}

// readWait adds up fedMetric of upstreamSlug over the downstream's nodes.
func (f *federationRun) readWait(ctx context.Context) (histSample, error) {
	var total histSample
	for _, u := range f.metrics {
		body, err := getBody(ctx, f.adm.hc, u)
		if err != nil {
			return histSample{}, err
		}
		s, err := parseHistogram(body, fedMetric, "provider", upstreamSlug)
		if err != nil {
			return histSample{}, fmt.Errorf("%s: %w", u, err)
		}
		total.Sum += s.Sum
		total.Count += s.Count
	}
	return total, nil
}

// getBody is GET u's 200 answer.
func getBody(ctx context.Context, hc *http.Client, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "oidcd-bench")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp.StatusCode, body, req.URL.Path)
	}
	return body, nil
}

// finish computes the run's figures once its workers are done: the
// upstream's wait from fedMetric's change, the links made meanwhile.
func (f *federationRun) finish(ctx context.Context, rep *report, stderr io.Writer) *fedFigures {
	after, err := f.readWait(ctx)
	var wait histSample
	known := f.waitOK && err == nil
	if known {
		if wait, err = after.minus(f.before); err != nil {
			known = false
		}
	}
	if err != nil {
		logf(stderr, "warning: %s: %v: the upstream's time is the browser's alone", federatedName, err)
	}
	ops := f.ops.Load()
	fig := splitFigures(rep.Latency.Mean, ops, time.Duration(f.upNs.Load()), time.Duration(f.downNs.Load()),
		time.Duration(f.exNs.Load()), f.upRequests.Load(), f.downRequests.Load(), wait, known)
	fig.Provisioning, fig.Warm = provisioningMode, f.warm
	if now, err := f.links(ctx); err != nil {
		logf(stderr, "warning: %s: reading the links after the run: %v", federatedName, err)
		fig.LinksMadeInRun = -1
	} else {
		for sub, at := range now {
			if !at.Equal(f.linkedAt[sub]) {
				fig.LinksMadeInRun++
			}
		}
	}
	return fig
}

// splitFigures is the split of ops operations of mean totalMs whose
// requests to the upstream took up in all, to the downstream down, their
// exchanges ex, while the downstream waited on the upstream wait (its
// exchanges' sum and count; known false when it could not be read).
func splitFigures(totalMs float64, ops uint64, up, down, ex time.Duration, upN, downN uint64, wait histSample, known bool) *fedFigures {
	f := &fedFigures{Ops: ops, TotalMs: totalMs, WaitKnown: known}
	if ops == 0 {
		return f
	}
	per := func(d time.Duration) float64 { return round3(d.Seconds() * 1000 / float64(ops)) }
	f.UpstreamBrowserMs, f.DownstreamBrowserMs, f.ExchangeMs = per(up), per(down), per(ex)
	f.UpstreamRequests = math.Round(float64(upN)/float64(ops)*100) / 100
	f.DownstreamRequests = math.Round(float64(downN)/float64(ops)*100) / 100
	if known && wait.Count > 0 {
		f.Exchanges = wait.Count
		f.UpstreamWaitMs = round3(wait.Sum * 1000 / float64(wait.Count))
	}
	f.UpstreamMs = round3(f.UpstreamBrowserMs + f.UpstreamWaitMs)
	f.OwnMs = round3(totalMs - f.UpstreamMs)
	return f
}

// close removes the downstream's provider (its upstream ends with the
// run, also with --keep) and the people the warm-up created there, and
// stops the upstream. Errors are logged.
func (f *federationRun) close(ctx context.Context, stderr io.Writer) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if f.idpID != "" {
		err := f.adm.do(cctx, "DELETE", "/identity-providers/"+f.idpID, nil, nil, 204)
		if err == nil {
			// Gone from every node before the next scenario signs in
			// there with a password of the provider's domain.
			err = f.onEveryNode(cctx, 404)
		}
		if err != nil {
			logf(stderr, "warning: %s: %v", federatedName, err)
		}
	}
	for _, id := range f.created {
		if err := f.adm.do(cctx, "DELETE", "/users/"+id, nil, nil, 204); err != nil {
			logf(stderr, "warning: %s: %v", federatedName, err)
		}
	}
	if f.up != nil {
		f.up.stop()
	}
}

// histSample is a histogram's sum and count.
type histSample struct {
	Sum   float64
	Count uint64
}

// minus is s since before: an error when the count went down (a node
// restarted in between, its histogram with it).
func (s histSample) minus(before histSample) (histSample, error) {
	if s.Count < before.Count || s.Sum < before.Sum {
		return histSample{}, fmt.Errorf("%s went down during the run (count %d to %d): a node restarted", fedMetric, before.Count, s.Count)
	}
	return histSample{Sum: s.Sum - before.Sum, Count: s.Count - before.Count}, nil
}

// parseHistogram adds up name's _sum and _count over the series of a
// Prometheus text exposition whose label label is value (every series
// when label is ""). A histogram not there yet is zero, not an error.
func parseHistogram(body []byte, name, label, value string) (histSample, error) {
	var s histSample
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		metric, labels, rest, err := splitSample(line)
		if err != nil {
			return histSample{}, err
		}
		isSum, isCount := metric == name+"_sum", metric == name+"_count"
		if !isSum && !isCount {
			continue
		}
		if label != "" && labels[label] != value {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return histSample{}, fmt.Errorf("%s: no value", metric)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return histSample{}, fmt.Errorf("%s: value %q", metric, fields[0])
		}
		if isSum {
			s.Sum += v
		} else {
			s.Count += uint64(v)
		}
	}
	return s, sc.Err()
}

// splitSample splits a sample line into its metric name, its labels and
// what follows them (the value and an optional timestamp).
func splitSample(line string) (metric string, labels map[string]string, rest string, err error) {
	i := strings.IndexAny(line, "{ \t")
	if i < 0 {
		return "", nil, "", fmt.Errorf("sample %q: no value", line)
	}
	metric, rest = line[:i], line[i:]
	if rest[0] != '{' {
		return metric, nil, rest, nil
	}
	labels = map[string]string{}
	rest = rest[1:]
	for range len(line) { // each pass takes a label or ends
		rest = strings.TrimLeft(rest, " \t,")
		if strings.HasPrefix(rest, "}") {
			return metric, labels, rest[1:], nil
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
			return "", nil, "", fmt.Errorf("sample %q: bad labels", line)
		}
		key := strings.TrimSpace(rest[:eq])
		rest = rest[eq+2:]
		var v strings.Builder
		closed := false
		for j := 0; j < len(rest); j++ {
			c := rest[j]
			if c == '\\' && j+1 < len(rest) {
				j++
				switch rest[j] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[j])
				}
				continue
			}
			if c == '"' {
				rest, closed = rest[j+1:], true
				break
			}
			v.WriteByte(c)
		}
		if !closed {
			return "", nil, "", fmt.Errorf("sample %q: unterminated label value", line)
		}
		labels[key] = v.String()
	}
	return "", nil, "", fmt.Errorf("sample %q: bad labels", line)
}

// writeTable prints the split of a federated sign-in.
func (f *fedFigures) writeTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s, mean per sign-in\tms\t\n", federatedName)
	fmt.Fprintf(tw, "total\t%.2f\t\n", f.TotalMs)
	fmt.Fprintf(tw, "the upstream's\t%.2f\t%s\n", f.UpstreamMs, f.upstreamWords())
	fmt.Fprintf(tw, "oidcd's own\t%.2f\ttotal less the upstream's: the browser at the downstream %.2f (%.1f requests, the wait above inside), the exchange %.2f\n",
		f.OwnMs, f.DownstreamBrowserMs, f.DownstreamRequests, f.ExchangeMs)
	tw.Flush()
	fmt.Fprintf(w, "links: %s\n", f.linkWords())
}

// upstreamWords says what the upstream's time is made of.
func (f *fedFigures) upstreamWords() string {
	s := fmt.Sprintf("the browser at the upstream %.2f (%.1f requests)", f.UpstreamBrowserMs, f.UpstreamRequests)
	if !f.WaitKnown {
		return s + "; the downstream's wait on it unknown (no " + fedMetric + ")"
	}
	return s + fmt.Sprintf(" + the downstream waiting on it at the callback %.2f (%s over %d exchanges)", f.UpstreamWaitMs, fedMetric, f.Exchanges)
}

// linkWords says what the warm-up and the run did with the links.
func (f *fedFigures) linkWords() string {
	s := fmt.Sprintf("%s; each of the %d people signed in once before the clock (%d linked to the person here, %d created)",
		f.Provisioning, f.Warm.People, f.Warm.Linked, f.Warm.Created)
	switch {
	case f.LinksMadeInRun < 0:
		return s + "; the links after the run could not be read"
	case f.LinksMadeInRun == 0:
		return s + "; every timed sign-in found its link"
	default:
		return s + fmt.Sprintf("; %d links were made again during the run", f.LinksMadeInRun)
	}
}

// besideRun is the password sign-in of the same nodes in the same run, a
// federated sign-in's reference: it has no target of its own.
type besideRun struct {
	OpsPerS float64 `json:"ops_per_s"`
	MeanMs  float64 `json:"mean_ms"`
	// RateRatio is the federated sign-ins' rate over the password
	// sign-ins'; OwnRatio oidcd's own time of a federated sign-in over
	// the password sign-in's mean.
	RateRatio float64 `json:"rate_ratio"`
	OwnRatio  float64 `json:"own_ratio,omitempty"`
}

// besidePassword sets every federated-signin run of runs beside the
// password-signin run on as many nodes.
func besidePassword(runs []matrixRun) {
	for i := range runs {
		r := &runs[i]
		if r.Scenario != federatedName {
			continue
		}
		pw, ok := findRun(runs, "password-signin", r.Nodes)
		if !ok || pw.OpsPerS <= 0 || pw.Latency.Mean <= 0 {
			continue
		}
		bs := &besideRun{OpsPerS: pw.OpsPerS, MeanMs: pw.Latency.Mean, RateRatio: math.Round(r.OpsPerS/pw.OpsPerS*100) / 100}
		if r.Federation != nil && r.Federation.Ops > 0 {
			bs.OwnRatio = math.Round(r.Federation.OwnMs/pw.Latency.Mean*100) / 100
		}
		r.Beside = bs
	}
}

// besideCell is the matrix table's "of ceiling" cell of a federated run.
func (r matrixRun) besideCell() string {
	if r.Beside == nil {
		return "— (beside password-signin: none in this run)"
	}
	return fmt.Sprintf("%.2f of password-signin's rate (%s/s, same run)", r.Beside.RateRatio, thousands(r.Beside.OpsPerS))
}

// federationTable renders the split of the matrix's federated runs, set
// beside the password sign-ins of the same run ("" without one).
func (res *matrixResult) federationTable() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	for _, r := range res.Runs {
		f := r.Federation
		if r.Scenario != federatedName || f == nil {
			continue
		}
		if b.Len() == 0 {
			p("\nThe federated sign-in beside the password sign-in (means per sign-in, ms; no target of its own): the upstream's is the browser's requests to the upstream oidcd and the downstream waiting on it at the callback (`%s` on its nodes, before and after the run); oidcd's own is the rest. Before the clock each person signed in once through the upstream, which made the link; the figures are the everyday sign-in that finds it.\n\n", fedMetric)
			p("| nodes | federated ops/s | total | the upstream's: browser there + the downstream's wait | oidcd's own | password-signin: ops/s, mean | own / password mean | links |\n|---|---|---|---|---|---|---|---|\n")
		}
		wait := "unknown"
		if f.WaitKnown {
			wait = fmt.Sprintf("%.2f", f.UpstreamWaitMs)
		}
		pw, ratio := "—", "—"
		if bs := r.Beside; bs != nil {
			pw = fmt.Sprintf("%s/s, %.2f", thousands(bs.OpsPerS), bs.MeanMs)
			if bs.OwnRatio > 0 {
				ratio = fmt.Sprintf("%.2f", bs.OwnRatio)
			}
		}
		links := fmt.Sprintf("%d linked, %d created before the clock; ", f.Warm.Linked, f.Warm.Created)
		switch {
		case f.LinksMadeInRun == 0:
			links += "all found"
		case f.LinksMadeInRun < 0:
			links += "unread after"
		default:
			links += fmt.Sprintf("%d made again", f.LinksMadeInRun)
		}
		p("| %d | %s | %.2f | %.2f: %.2f + %s | %.2f | %s | %s | %s |\n", r.Nodes, thousands(r.OpsPerS), f.TotalMs,
			f.UpstreamMs, f.UpstreamBrowserMs, wait, f.OwnMs, pw, ratio, links)
	}
	return b.String()
}
