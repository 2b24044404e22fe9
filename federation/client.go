package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults and bounds of a Client.
const (
	// DefaultTimeout bounds one call to the upstream, from dialing to the
	// last byte of the answer: a sign-in page waits on it.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBody bounds an answer of the upstream (discovery, JWKS,
	// token response) and a token handed in: far above any real one, and
	// small enough that an upstream cannot make a node hold much.
	DefaultMaxBody = 1 << 20

	// dialTimeout bounds the connect (and TLS handshake) of the client
	// NewClient builds, under the whole call's Timeout.
	dialTimeout = 5 * time.Second

	// The freshness of a cached discovery document or JWKS: as the
	// answer's Cache-Control max-age says, but at least cacheFloor (an
	// upstream saying no-store must not be asked at every sign-in) and at
	// most cacheCeiling (a rotated key is seen within a day whatever the
	// upstream said), and cacheDefault without a max-age.
	cacheFloor   = time.Minute
	cacheCeiling = 24 * time.Hour
	cacheDefault = time.Hour

	// maxStale is how long after its fetch a cached copy is still served
	// when refreshing it fails: an upstream's discovery or JWKS endpoint
	// that flaps must not stop sign-ins and logouts, but a key the
	// upstream withdrew must not stay trusted for long because we cannot
	// reach it.
	maxStale = 6 * time.Hour
	// failureBackoff is how long after a failed fetch the next is tried:
	// meanwhile callers get the stale copy (or the failure) at once
	// instead of each waiting out a timeout against a sick upstream.
	failureBackoff = 10 * time.Second
	// refetchFloor is the least age of a cached JWKS before a token with
	// an unknown kid makes it fetched again: keys rotate rarely, and
	// tokens with invented kids must not make us hammer the upstream.
	refetchFloor = 30 * time.Second

	// maxRedirects bounds the same-host redirects a GET follows.
	maxRedirects = 5
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// HTTP is the client the upstream is asked through (nil: one with a
	// 5 s connect and TLS handshake timeout and the proxy of the
	// environment). Its CheckRedirect is replaced: GETs follow redirects
	// on the same scheme and host only, the token request none.
	HTTP *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Timeout bounds each call to the upstream (0: DefaultTimeout).
	Timeout time.Duration
	// MaxBody bounds each answer and each token handed in (0:
	// DefaultMaxBody).
	MaxBody int64
	// Logger gets a warning when a stale copy is served (nil: discarded).
	Logger *slog.Logger
}

// Client talks to upstream OpenID providers for one node: it caches their
// discovery documents and key sets and checks what they answer. It is safe
// for concurrent use and meant to live as long as the node; the upstreams
// themselves are handed in with each call, so a changed registration takes
// effect at the next call.
type Client struct {
	get     *http.Client // follows same-host redirects
	post    *http.Client // follows none
	now     func() time.Time
	timeout time.Duration
	maxBody int64
	log     *slog.Logger

	discovery cache[*Metadata] // by issuer
	jwks      cache[*keySet]   // by jwks_uri
}

// NewClient returns a Client with opts.
func NewClient(opts Options) *Client {
	c := &Client{now: opts.Now, timeout: opts.Timeout, maxBody: opts.MaxBody, log: opts.Logger}
	if c.now == nil {
		c.now = time.Now
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxBody
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	base := opts.HTTP
	if base == nil {
		base = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   dialTimeout,
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		}}
	}
	get, post := *base, *base
	get.CheckRedirect = sameHostRedirect
	post.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.get, c.post = &get, &post
	return c
}

// errRedirect refuses a redirect to another scheme or host: an upstream's
// discovery or JWKS URL moving to a host nobody registered is not the
// upstream's document any more.
var errRedirect = errors.New("redirect to another host")

func sameHostRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("more than %d redirects: %w", maxRedirects, errRedirect)
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
		return fmt.Errorf("%s to %s://%s: %w", first.Host, req.URL.Scheme, req.URL.Host, errRedirect)
	}
	return nil
}

// answer is what the upstream answered to one request.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends req (built without a context) through hc under the call's
// timeout and reads at most maxBody bytes of the answer. A failure to
// send or read is ErrUnreachable, a refused redirect or an answer too
// large ErrInvalid; the status is the caller's to judge.
func (c *Client) do(ctx context.Context, hc *http.Client, req *http.Request) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		if errors.Is(err, errRedirect) {
			return nil, withKind(ErrInvalid, err, "%s %s", req.Method, req.URL.Redacted())
		}
		return nil, withKind(ErrUnreachable, err, "%s %s", req.Method, req.URL.Redacted())
	}
	defer resp.Body.Close()
	if resp.ContentLength > c.maxBody {
		return nil, invalidf("%s %s: answer of %d bytes is larger than %d", req.Method, req.URL.Redacted(), resp.ContentLength, c.maxBody)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, withKind(ErrUnreachable, err, "%s %s: reading the answer", req.Method, req.URL.Redacted())
	}
	if int64(len(body)) > c.maxBody {
		return nil, invalidf("%s %s: answer is larger than %d bytes", req.Method, req.URL.Redacted(), c.maxBody)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// getJSON fetches a document (discovery, JWKS): 200 is the document, 5xx
// and 429 are ErrUnreachable (the upstream is sick or shedding load), any
// other status ErrInvalid (the URL is not what the upstream serves).
func (c *Client) getJSON(ctx context.Context, rawURL string) (*answer, error) {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, invalidf("GET %q: %v", cleanText(rawURL, 256), err)
	}
	req.Header.Set("Accept", "application/json")
	a, err := c.do(ctx, c.get, req)
	if err != nil {
		return nil, err
	}
	if err := statusError(req, a.status); err != nil {
		return nil, err
	}
	if a.status != http.StatusOK {
		return nil, invalidf("GET %s: HTTP %d", req.URL.Redacted(), a.status)
	}
	return a, nil
}

// statusError is ErrUnreachable for a status that says the upstream
// cannot answer now (5xx, 429), else nil.
func statusError(req *http.Request, status int) error {
	if status >= 500 || status == http.StatusTooManyRequests {
		return unreachablef("%s %s: HTTP %d", req.Method, req.URL.Redacted(), status)
	}
	return nil
}

// maxAge is how long an answer stays fresh by its Cache-Control: max-age
// within [cacheFloor, cacheCeiling]; no-store, no-cache or max-age=0 give
// the floor, no max-age the default.
func maxAge(h http.Header) time.Duration {
	ttl := cacheDefault
	for _, line := range h.Values("Cache-Control") {
		for _, d := range strings.Split(line, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				return cacheFloor
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(value, `"`), 10, 64)
				if err != nil || n < 0 {
					continue
				}
				if n > int64(cacheCeiling/time.Second) {
					n = int64(cacheCeiling / time.Second)
				}
				ttl = time.Duration(n) * time.Second
			}
		}
	}
	return min(max(ttl, cacheFloor), cacheCeiling)
}

// cache holds one fetched value per key (an issuer, a jwks_uri): keys come
// from the registered upstreams, so it stays as small as their list.
type cache[T any] struct {
	mu    sync.Mutex
	slots map[string]*slot[T]
}

// slot is one key's value and the state of its fetching.
type slot[T any] struct {
	sem chan struct{} // holds a token while a fetch runs: one fetch per key at a time

	// Guarded by cache.mu.
	val     T
	have    bool
	fetched time.Time // when val was fetched
	fresh   time.Time // val is fresh before this
	retryAt time.Time // after a failed fetch, none is tried before this
	err     error     // that failure
}

func (cc *cache[T]) slot(key string) *slot[T] {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.slots == nil {
		cc.slots = map[string]*slot[T]{}
	}
	s, ok := cc.slots[key]
	if !ok {
		s = &slot[T]{sem: make(chan struct{}, 1)}
		cc.slots[key] = s
	}
	return s
}

// fetchFunc fetches a key's value and says how long it is fresh.
type fetchFunc[T any] func(ctx context.Context) (T, time.Duration, error)

// load returns key's value: the cached one while fresh, else a fetched
// one. With renew (a token named a kid the cached key set lacks) a cached
// value counts as fresh only for refetchFloor after its fetch, and a
// failed fetch is the failure (the caller holds the cached value already
// and wants to know whether a newer one exists). Else, when fetching fails
// (or failed less than failureBackoff ago) a cached value up to maxStale
// old is returned instead of the failure. While another
// caller fetches, a caller without renew gets the cached value at once
// when there is a usable one, else it waits for that fetch.
func load[T any](ctx context.Context, c *Client, cc *cache[T], key string, renew bool, fetch fetchFunc[T]) (T, error) {
	s := cc.slot(key)
	var zero T
	// decide reports what the cache can answer without a fetch: done
	// when it has answered (v, err).
	decide := func(busy bool) (v T, err error, done bool) {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		now := c.now()
		limit := s.fresh
		if floor := s.fetched.Add(refetchFloor); renew && floor.Before(limit) {
			limit = floor
		}
		usable := !renew && s.have && now.Before(s.fetched.Add(maxStale))
		switch {
		case s.have && now.Before(limit):
			return s.val, nil, true
		case s.err != nil && now.Before(s.retryAt):
			if usable {
				return s.val, nil, true
			}
			return zero, s.err, true
		case busy && usable:
			return s.val, nil, true
		}
		return zero, nil, false
	}
	if v, err, done := decide(false); done {
		return v, err
	}
	select {
	case s.sem <- struct{}{}:
	default:
		if v, err, done := decide(true); done {
			return v, err
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return zero, withKind(ErrUnreachable, ctx.Err(), "waiting for %s", key)
		}
	}
	defer func() { <-s.sem }()
	// Another caller may have fetched while this one waited.
	if v, err, done := decide(false); done {
		return v, err
	}
	v, ttl, err := fetch(ctx)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	now := c.now()
	if err == nil {
		s.val, s.have, s.fetched, s.fresh, s.err = v, true, now, now.Add(ttl), nil
		return v, nil
	}
	s.err, s.retryAt = err, now.Add(failureBackoff)
	if !renew && s.have && now.Before(s.fetched.Add(maxStale)) {
		c.log.Warn("federation: refreshing failed, serving the cached copy", "key", key, "fetched", s.fetched, "err", err)
		return s.val, nil
	}
	return zero, err
}
