package oidc

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/ratelimit"
)

// rateLimiter is the provider's request-rate guard for the token,
// introspection and revocation endpoints (by default 5 requests a minute
// per client and address). A nil backend means "off": every request is
// allowed.
type rateLimiter struct {
	backend ratelimit.Limiter
}

// Rate-limited endpoints: each has its own budget (the limit holds for each
// endpoint separately).
const (
	limitToken      = "token"
	limitIntrospect = "introspect"
	limitRevoke     = "revoke"
)

// newRateLimiter is the guard of spec ("N/duration" or "off", see
// ratelimit.Parse): shared when given (a cluster's, kept on its leader),
// else a Window of this provider's own on the clock now.
func newRateLimiter(spec string, shared ratelimit.Limiter, now func() time.Time) (*rateLimiter, error) {
	w, err := ratelimit.Parse(spec, now)
	switch {
	case err != nil:
		return nil, fmt.Errorf("oidc: %w", err)
	case w == nil:
		return &rateLimiter{}, nil
	case shared != nil:
		return &rateLimiter{backend: shared}, nil
	}
	return &rateLimiter{backend: w}, nil
}

// Allow asks the backend about key; a nil limiter or backend allows all.
func (l *rateLimiter) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if !l.on() {
		return true, 0, nil
	}
	return l.backend.Allow(ctx, key)
}

// on reports whether requests are limited at all: --rate-limit "off"
// turns every limit off, the clients' own included (benchmarks only).
func (l *rateLimiter) on() bool { return l != nil && l.backend != nil }

// rateKey is the limiter key of one request: endpoint, client IP and the
// client_id as sent, before authentication. The IP is the peer address of
// the connection, an IPv6 address by its /64 like every per-address rule
// (remoteIP); X-Forwarded-For is not trusted. Long client ids are hashed
// so a key stays small whatever a client sends.
func rateKey(endpoint, clientID string, r *http.Request) string {
	ip := remoteIP(r)
	if len(clientID) > 64 {
		clientID = "#" + authn.HashToken(clientID)
	}
	return endpoint + "\x00" + ip + "\x00" + clientID
}

// ownLimit is the limit of its own (the client registration's rate_limit)
// under which the requests of cl count once cl has authenticated: only a
// confidential client that is not suspended has one, and only when its
// registration sets one.
func ownLimit(cl fsm.Client) (ratelimit.Limit, bool) {
	if cl.Type != fsm.ClientConfidential || cl.Suspended || cl.RateLimit == "" {
		return ratelimit.Limit{}, false
	}
	lim, err := ratelimit.ParseLimit(cl.RateLimit) // apply checked its form
	return lim, err == nil
}

// limitAndAuthenticate runs the rate limit of endpoint and client
// authentication for a back-channel request whose form read as ferr and
// whose credentials are cred, reading the registration once with lookup.
// When the request must stop at the limit it has answered, and returns
// false. Otherwise it returns the authenticated client, or the error to
// answer: ferr first, then authentication's.
//
// Which limit: a request counts under endpoint, client address and the
// client_id as sent (rateKey), against the node's --rate-limit (by
// default 5 a minute), except a request that authenticates as a client with a
// limit of its own (ownLimit), which counts against that limit in a
// budget of its own (ratelimit.Own). The reasoning, as a security review
// would want it:
//
//   - The limit is checked before the secret matters, so it must never
//     be laxer for a request that has not proven anything. An unknown
//     client_id, a wrong or missing secret, a malformed request, a
//     suspended client and every public client (which has no secret to
//     prove) all get the default, as before. Choosing the limit from the
//     client_id alone would hand a raised limit to anyone who names a
//     raised client: client_ids are not secret.
//   - But a limit that depends on whether authentication succeeded must
//     not turn the 429 into an oracle. If wrong secrets were refused at
//     the default while the right one still went through, someone who
//     used up the default could go on guessing for free: every refused
//     guess answers "wrong", the right one answers otherwise. So an
//     authenticated request is also refused while the default budget of
//     the same key is spent (ratelimit.Own does both in one step): once
//     failures used it up, right and wrong secrets alike get 429. The
//     guesses a key allows stay the default's, as before.
//   - Authenticating first costs little: a client secret is a 256-bit
//     random value checked against its SHA-256 (password.VerifySecret),
//     and the registration is read once for both steps. Only a request
//     naming a client with a limit of its own is authenticated before
//     the limit; every other request is limited first, exactly as before.
//   - What remains: requests that fail still share the default budget of
//     their key, so someone behind the same address as the app (the key
//     holds the address) who sends five bad requests naming it stops the
//     app for a window, as the default limit already allowed. Another
//     address cannot touch the app's budget.
func (p *Provider) limitAndAuthenticate(w http.ResponseWriter, r *http.Request, endpoint string, cred credentials, ferr *Error,
	publicOK bool, lookup func(id string) (fsm.Client, error)) (fsm.Client, *Error, bool) {
	var named fsm.Client
	var nerr error
	read, readID := false, ""
	once := func(id string) (fsm.Client, error) {
		if !read || id != readID {
			named, nerr = lookup(id)
			read, readID = true, id
		}
		return named, nerr
	}
	authenticate := func() (fsm.Client, *Error) {
		if ferr != nil {
			return fsm.Client{}, ferr
		}
		return p.authenticateWith(r.Context(), cred, publicOK, once)
	}
	if !p.limiter.on() {
		c, e := authenticate()
		return c, e, true
	}
	var own ratelimit.Limit
	hasOwn := false
	if ferr == nil && cred.err == nil && cred.id != "" {
		if cl, err := once(cred.id); err == nil {
			own, hasOwn = ownLimit(cl)
		}
	}
	key := rateKey(endpoint, cred.id, r)
	if !hasOwn {
		if !p.rateLimit(w, r, endpoint, key) {
			return fsm.Client{}, nil, false
		}
		c, e := authenticate()
		return c, e, true
	}
	c, e := authenticate()
	if e == nil {
		key = ratelimit.Own(key, own)
	}
	if !p.rateLimit(w, r, endpoint, key) {
		return fsm.Client{}, nil, false
	}
	return c, e, true
}

// rateLimit counts this request under key (rateKey, or ratelimit.Own of
// it) for endpoint. It answers and returns false when the request must
// stop here: 429 with the JSON error envelope and Retry-After, or 500
// server_error when the limiter fails.
func (p *Provider) rateLimit(w http.ResponseWriter, r *http.Request, endpoint, key string) bool {
	ok, retry, err := p.limiter.Allow(r.Context(), key)
	if err != nil {
		p.log.Error("rate limiter failed", "endpoint", endpoint, "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		writeOAuthError(w, errTokServer)
		return false
	}
	if ok {
		return true
	}
	p.metrics.rateLimited.WithLabelValues(endpoint).Inc()
	secs := int64((retry + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteError(w, r, http.StatusTooManyRequests, httpx.CodeRateLimited, "too many requests; retry later")
	return false
}

// remoteIP is the source address per-address limits count: the client's
// address (httpx.ClientAddr: the connection's peer, or what a trusted
// proxy says), an IPv6 address by its /64 (httpx.SourceKey).
func remoteIP(r *http.Request) string { return httpx.SourceKey(httpx.ClientAddr(r)) }
