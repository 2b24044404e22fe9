package oidc

import (
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/redirect"
	"github.com/oidcd/oidcd/keys"
)

// CORS (docs/application-developers.md says it to application
// developers):
//
//   - Discovery and the key set are public documents: every GET answer
//     carries Access-Control-Allow-Origin: *, and a preflight for GET is
//     granted to any origin. Nothing else about them depends on Origin.
//   - The token endpoint, userinfo (GET and POST) and the membership list
//     grant a preflight from an origin that some client lists in its web
//     origins (clientOrigins); their answers, errors included, are granted
//     to an origin only when the client the request names (the token
//     endpoint's client_id, however it authenticates) or the client the
//     bearer token was issued to lists it. Vary: Origin is on every
//     answer of theirs, granted or not.
//   - Introspection and revocation never answer CORS: only confidential
//     clients call them, from their servers. Their OPTIONS stays the
//     mux's 405.
//   - Access-Control-Allow-Credentials is never sent: no cookie is ever
//     read by these endpoints, and a page's credentials are its tokens.
//
// Cost. A preflight is one map lookup in originIndex, an in-memory copy
// of every client's origins rebuilt, whole, after a client is created,
// changed or deleted (OnApply, wired into fsm.FSM.OnApply by node) or the
// state is restored; a preflight writes nothing and reads no record. The
// real answers look the client up in the same index by id, so the token
// endpoint's 429, given before the client is read, is granted too.

// corsMaxAge is how long, in seconds, a browser may keep a granted
// preflight. A removed origin's real answers lose their grant at once;
// only its preflights may be remembered this long.
const corsMaxAge = 600

// The fixed header values of the CORS answers, shared by every answer:
// nothing appends to them (see DiscoveryHandler).
var (
	corsAnyOrigin    = []string{"*"}
	corsVary         = []string{"Origin"}
	corsAllowHeaders = []string{"authorization, content-type, x-correlation-id"}
	corsExpose       = []string{"WWW-Authenticate, X-Correlation-ID, Retry-After"}
	corsMaxAgeValue  = []string{strconv.Itoa(corsMaxAge)}
	corsPublicAllow  = []string{"GET, HEAD, OPTIONS"}
	corsPublicMethod = []string{"GET, HEAD"}
)

// registerCORS mounts the preflights. Introspection and revocation have
// none on purpose.
func (p *Provider) registerCORS(mux *http.ServeMux) {
	mux.HandleFunc("OPTIONS "+PathDiscovery, servePublicPreflight)
	mux.HandleFunc("OPTIONS "+PathJWKS, servePublicPreflight)
	mux.Handle("OPTIONS "+PathToken, p.preflight(http.MethodPost))
	mux.Handle("OPTIONS "+PathUserinfo, p.preflight(http.MethodGet, http.MethodPost))
	mux.Handle("OPTIONS "+PathMemberships, p.preflight(http.MethodGet))
}

// servePublicPreflight answers OPTIONS on discovery and the key set: 204,
// and for a preflight of GET or HEAD the grant to any origin.
func servePublicPreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Allow"] = corsPublicAllow
	switch r.Header.Get("Access-Control-Request-Method") {
	case http.MethodGet, http.MethodHead:
		h["Access-Control-Allow-Origin"] = corsAnyOrigin
		h["Access-Control-Allow-Methods"] = corsPublicMethod
		h["Access-Control-Allow-Headers"] = corsAllowHeaders
		h["Access-Control-Max-Age"] = corsMaxAgeValue
	}
	w.WriteHeader(http.StatusNoContent)
}

// preflight answers OPTIONS on an endpoint served for methods: 204
// always, with Allow and Vary: Origin, and the grant only for a preflight
// of one of methods from an origin some client lists. An unlisted origin
// gets the same 204 without a CORS header: the browser refuses the call
// on the missing grant, and the page learns nothing from a status it
// cannot read anyway.
func (p *Provider) preflight(methods ...string) http.Handler {
	allow := []string{strings.Join(append(methods, http.MethodOptions), ", ")}
	granted := make(map[string][]string, len(methods))
	for _, m := range methods {
		granted[m] = []string{m}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Allow"] = allow
		h["Vary"] = corsVary
		origin := requestOrigin(r)
		if m, ok := granted[r.Header.Get("Access-Control-Request-Method")]; ok && origin != nil && p.origins.current().listed(origin[0]) {
			h["Access-Control-Allow-Origin"] = origin
			h["Access-Control-Allow-Methods"] = m
			h["Access-Control-Allow-Headers"] = corsAllowHeaders
			h["Access-Control-Max-Age"] = corsMaxAgeValue
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// requestOrigin is the request's Origin header as its one-element value
// slice (shared with the request, read only), or nil when there is none
// or more than one.
func requestOrigin(r *http.Request) []string {
	if o := r.Header["Origin"]; len(o) == 1 && o[0] != "" {
		return o[:1:1]
	}
	return nil
}

// corsClient sets the CORS headers of an answer about to be written for
// the client named clientID (the token endpoint's client_id as sent):
// Vary: Origin always, and the grant when that client lists the
// request's origin. It must run before the status is written.
func (p *Provider) corsClient(w http.ResponseWriter, r *http.Request, clientID string) {
	h := w.Header()
	h["Vary"] = corsVary
	if origin := requestOrigin(r); origin != nil && clientID != "" && p.origins.current().allows(clientID, origin[0]) {
		grant(h, origin)
	}
}

// corsBearer is corsClient for a bearer endpoint (userinfo, the
// membership list), whose client is the one the token was issued to:
// acc's when the check passed, else the one the token's app session names
// (tokenClient), so that a 401 for a revoked or expired token is readable
// by the page that sent it. A token nobody issued names no client and
// gets no grant. The extra work of a failed check is done only for an
// origin some client lists.
func (p *Provider) corsBearer(w http.ResponseWriter, r *http.Request, tok accessToken, acc fsm.Access, err error) {
	h := w.Header()
	h["Vary"] = corsVary
	origin := requestOrigin(r)
	if origin == nil {
		return
	}
	idx := p.origins.current()
	if !idx.listed(origin[0]) {
		return
	}
	clientID := acc.ClientID
	if err != nil && clientID == "" {
		clientID = p.tokenClient(r, tok)
	}
	if clientID != "" && idx.allows(clientID, origin[0]) {
		grant(h, origin)
	}
}

// grant sets the grant of a real answer to origin.
func grant(h http.Header, origin []string) {
	h["Access-Control-Allow-Origin"] = origin
	h["Access-Control-Expose-Headers"] = corsExpose
}

// tokenClient is the client the request's bearer token was issued to,
// when the token is ours but failed its check: from tok's app session
// when it parsed, else from the sid of a token whose signature is ours
// (one past its exp, most often). "" when it names none still stored.
func (p *Provider) tokenClient(r *http.Request, tok accessToken) string {
	sid := tok.sid
	if sid == "" {
		raw := bearerToken(r)
		if raw == "" || len(raw) > keys.MaxTokenSize {
			return ""
		}
		payload, _, err := p.cfg.Keys.VerifyKid([]byte(raw))
		if err != nil {
			return ""
		}
		var c bearerClaims
		if json.Unmarshal(payload, &c) != nil || c.Iss != p.cfg.Issuer {
			return ""
		}
		sid = c.SID
	}
	if sid == "" {
		return ""
	}
	a, err := p.cfg.State.AppSession(sid)
	if err != nil {
		return ""
	}
	return a.ClientID
}

// clientOrigins are the web origins of c: its registration's when it
// names them (WebOriginsSet, possibly none), each as a browser writes it,
// else redirect.DefaultOrigins (a public client's redirect URIs' origins,
// a confidential client's none).
func clientOrigins(c fsm.Client) []string {
	return redirect.Origins(c.Type == fsm.ClientPublic, c.WebOriginsSet, c.WebOrigins, c.RedirectURIs)
}

// originIndex is every client's web origins at one mark: the set of all
// of them (preflights) and each client's (real answers). Read only once
// published.
type originIndex struct {
	mark   originMark
	any    map[string]struct{}
	client map[string][]string // client id: its origins, a handful
}

// listed reports whether some client lists origin.
func (x *originIndex) listed(origin string) bool {
	_, ok := x.any[origin]
	return ok
}

// allows reports whether client clientID lists origin.
func (x *originIndex) allows(clientID, origin string) bool {
	for _, o := range x.client[clientID] {
		if o == origin {
			return true
		}
	}
	return false
}

// newOriginIndex indexes clients. The built-in client (AdminClientID) is
// never stored; were a record of that id there, it would not count.
func newOriginIndex(clients []fsm.Client, mark originMark) *originIndex {
	x := &originIndex{mark: mark, any: map[string]struct{}{}, client: map[string][]string{}}
	for _, c := range clients {
		if c.ID == AdminClientID {
			continue
		}
		os := clientOrigins(c)
		if len(os) == 0 {
			continue
		}
		x.client[c.ID] = os
		for _, o := range os {
			x.any[o] = struct{}{}
		}
	}
	return x
}

// originMark names the state an originIndex was built from: once OnApply
// is wired, a count of the commands that may have changed a client (gen);
// before, the applied index, so an unwired provider (a test's) is still
// current, at the cost of a rebuild after every write.
type originMark struct {
	hooked bool
	n      uint64
}

// origins keeps the current originIndex.
type origins struct {
	state *fsm.State
	log   *slog.Logger

	hooked atomic.Bool
	gen    atomic.Uint64
	cur    atomic.Pointer[originIndex]
	mu     sync.Mutex // one rebuild at a time
}

func newOrigins(state *fsm.State, log *slog.Logger) *origins {
	return &origins{state: state, log: log}
}

// mark is the mark of the state now.
func (o *origins) mark() originMark {
	if o.hooked.Load() {
		return originMark{hooked: true, n: o.gen.Load()}
	}
	return originMark{n: o.state.Applied()}
}

// current returns the index of the state now, rebuilding it when a
// client may have changed since it was built. When the clients cannot be
// read it returns the last index (or an empty one) and tries again at the
// next call.
func (o *origins) current() *originIndex {
	m := o.mark()
	if x := o.cur.Load(); x != nil && x.mark == m {
		return x
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// The mark is taken before the read: a change committed during it
	// moves the mark again, and the next call rebuilds.
	m = o.mark()
	if x := o.cur.Load(); x != nil && x.mark == m {
		return x
	}
	clients, _, err := o.state.Clients(fsm.Page{Page: 1, PageSize: math.MaxInt})
	if err != nil {
		o.log.Error("read clients for CORS", "err", err)
		if x := o.cur.Load(); x != nil {
			return x
		}
		return &originIndex{}
	}
	x := newOriginIndex(clients, m)
	o.cur.Store(x)
	return x
}

// OnApply tells the provider which command types the FSM just applied;
// wire it into fsm.FSM.OnApply (as keys.Manager.OnApply). After a client
// is created, updated or deleted, or a restore (which fsm announces as
// TypeAddKey), the next CORS answer rebuilds the index of web origins.
// Until it is first called the index follows the applied index instead.
// It must not block, and does not.
func (p *Provider) OnApply(types []fsm.Type) {
	o := p.origins
	o.hooked.Store(true)
	for _, t := range types {
		switch t {
		case fsm.TypeCreateClient, fsm.TypeUpdateClient, fsm.TypeDeleteClient, fsm.TypeAddKey:
			o.gen.Add(1)
			return
		}
	}
}
