package admin

import (
	"net/http"
	"net/url"

	"github.com/oidcd/oidcd/internal/httpx"
)

// staleParam is the query parameter of every GET that lets a caller read
// the answering node's own copy of the state instead of a linearizable
// one.
const staleParam = "stale"

// msgNoReadIndex answers a linearizable read whose read index could not
// be had.
const msgNoReadIndex = "cannot confirm this node is up to date (no leader reachable); try again, or add ?stale=true to read this node's own copy"

// readMode says how a GET route reaches a consistent answer.
type readMode int

const (
	// linearizable (every route not in readModes): a read index first, so
	// the answer reflects every write acknowledged anywhere before the
	// request began; ?stale=true skips it.
	linearizable readMode = iota
	// nodeLocal: the answer describes the answering node (its raft view,
	// its applied index, the integrity of its own copy of the audit
	// trail), and a node cut off from the leader must still give it, so
	// there is never a read index.
	nodeLocal
	// selfLinearized: the handler takes its own read index (GET /snapshot,
	// through Cluster.Backup, whose contract includes every acknowledged
	// write), so a second one here would only cost a round trip; stale
	// does not weaken it.
	selfLinearized
)

// readModes lists the GET routes that are not linearized by read; every
// other GET is. Kept here, beside the one place that applies it, rather
// than in each handler.
var readModes = map[string]readMode{
	"/status":  nodeLocal,
	"/cluster": nodeLocal,
	// Each node checks its own state file's chain; audit verify then
	// compares the nodes at the newest seq they all hold, which no read
	// index changes, and a cut-off node must still be checkable.
	"/audit/verify": nodeLocal,
	"/snapshot":     selfLinearized,
}

// read wraps the GET handler of path (and so its HEAD, which the mux sends
// to it): it checks ?stale and, for a linearizable route read without
// stale=true, waits for Config.ReadIndex before the handler reads the
// local state. It runs after authentication, so an unauthenticated caller
// costs the cluster nothing. A read index that cannot be had (no leader
// reachable, its deadline passed) is answered 503 SERVICE_UNAVAILABLE:
// never an answer that may miss an acknowledged write.
func (a *api) read(path string, next http.HandlerFunc) http.HandlerFunc {
	mode := readModes[path]
	return func(w http.ResponseWriter, r *http.Request) {
		stale, bad := parseStale(r.URL.Query())
		if len(bad) > 0 {
			writeInvalid(w, r, bad)
			return
		}
		// A read index taken to check the credential (an API key, a
		// grant) already came after the request began.
		if mode == linearizable && !stale && a.ReadIndex != nil && !readIndexed(r.Context()) {
			if err := a.ReadIndex(r.Context()); err != nil {
				a.Logger.Warn("admin: read index failed", "path", httpx.LogValue(r.URL.Path), "err", err,
					"correlation_id", httpx.CorrelationID(r.Context()))
				w.Header().Set("Retry-After", "1")
				httpx.WriteError(w, r, http.StatusServiceUnavailable, httpx.CodeUnavailable, msgNoReadIndex)
				return
			}
		}
		next(w, r)
	}
}

// parseStale reads ?stale: absent or "false" is a linearizable read,
// "true" a read of the node's own copy. Anything else, or the parameter
// given more than once, is a problem.
func parseStale(q url.Values) (bool, problems) {
	var p problems
	vals, ok := q[staleParam]
	switch {
	case !ok:
		return false, nil
	case len(vals) != 1:
		p.add(staleParam, codeInvalid, "must be given once")
	case vals[0] == "true":
		return true, nil
	case vals[0] == "false":
		return false, nil
	default:
		p.add(staleParam, codeInvalid, "must be true or false")
	}
	return false, p
}
