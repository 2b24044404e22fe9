package oidc

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/ratelimit"
)

// rateLimiter is the provider's request-rate guard of SPEC.md 8 for the
// token, introspection and revocation endpoints. A nil backend means
// "off": every request is allowed.
type rateLimiter struct {
	backend ratelimit.Limiter
}

// Rate-limited endpoints: each has its own budget (SPEC.md 8, "separate
// statement for each").
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
	if l == nil || l.backend == nil {
		return true, 0, nil
	}
	return l.backend.Allow(ctx, key)
}

// rateKey is the limiter key of one request: endpoint, client IP and the
// client_id as sent, before authentication. The IP is the peer address of
// the connection, an IPv6 address by its /64 like every per-address rule
// (remoteIP); X-Forwarded-For is not trusted. Long client ids are hashed
// so a key stays small whatever a client sends.
func rateKey(endpoint, clientID string, r *http.Request) string {
	ip := remoteIP(r)
	if len(clientID) > 64 {
		clientID = "#" + hashToken(clientID)
	}
	return endpoint + "\x00" + ip + "\x00" + clientID
}

// rateLimit applies the limit of endpoint to this request. It answers and
// returns false when the request must stop here: 429 with the envelope of
// SPEC.md 2.11 and Retry-After, or 500 server_error when the limiter fails.
func (p *Provider) rateLimit(w http.ResponseWriter, r *http.Request, endpoint, clientID string) bool {
	ok, retry, err := p.limiter.Allow(r.Context(), rateKey(endpoint, clientID, r))
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
