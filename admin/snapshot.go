package admin

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
)

// DefaultMaxSnapshotBytes caps a backup sent to POST /snapshot: 1 GiB.
const DefaultMaxSnapshotBytes = 1 << 30

// SnapshotContentType is the media type of a backup, both ways.
const SnapshotContentType = "application/octet-stream"

// transferTimeout replaces the server's read and write timeouts (seconds,
// sized for JSON bodies) while a backup moves.
const transferTimeout = 15 * time.Minute

// backup answers GET /snapshot: a consistent copy of the whole state as a
// file download. The copy holds every secret of the cluster, the admin
// token hash and the key that seals browser state among them: whoever
// holds it holds the cluster.
//
// Headers go out with the first byte, so an error before it gets an
// envelope; an error after it cuts the connection (no final chunk), which
// clients see as a transfer that did not complete, never as a short file
// that looks whole.
func (a *api) backup(w http.ResponseWriter, r *http.Request) {
	if a.Cluster == nil {
		a.unavailable(w, r, "backup", errNotWired)
		return
	}
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(transferTimeout)) // unsupported in tests only
	name := "oidcd-snapshot-" + a.now().Format("20060102T150405Z") + ".db"
	dl := &download{w: w, name: name}
	err := a.Cluster.Backup(r.Context(), dl)
	switch {
	case err == nil:
		dl.start() // an empty copy still answers 200
	case !dl.started:
		a.clusterFailed(w, r, "backup", err)
	default:
		a.Logger.Error("admin: backup cut short", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		panic(http.ErrAbortHandler)
	}
}

// download writes the answer's headers before its first byte.
type download struct {
	w       http.ResponseWriter
	name    string
	started bool
}

func (d *download) start() {
	if d.started {
		return
	}
	d.started = true
	h := d.w.Header()
	h.Set("Content-Type", SnapshotContentType)
	h.Set("Content-Disposition", `attachment; filename="`+d.name+`"`)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	d.w.WriteHeader(http.StatusOK)
}

func (d *download) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	d.start()
	return d.w.Write(p)
}

// restore answers POST /snapshot: the body, a file from GET /snapshot,
// becomes the state of the whole cluster (204). Only the leader can run it;
// elsewhere the Cluster answers 409 naming the leader. The Cluster checks
// that the body is a state file of this version before anything changes:
// 400 otherwise, 413 above MaxSnapshotBytes.
//
// Everything comes back as it was in the backup, the admin token included
// (it lives in the state as a hash, wherever it came from): after a
// restore, the token that works on every node is the one that worked when
// the backup was made, whatever token the nodes were started with; a node
// whose --admin-token differs says so in its log.
func (a *api) restore(w http.ResponseWriter, r *http.Request) {
	if a.Cluster == nil {
		a.unavailable(w, r, "restore", errNotWired)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != SnapshotContentType {
			httpx.WriteError(w, r, http.StatusUnsupportedMediaType, httpx.CodeBadRequest, "Content-Type must be "+SnapshotContentType)
			return
		}
	}
	if r.ContentLength > a.MaxSnapshotBytes {
		tooLarge(w, r, a.MaxSnapshotBytes)
		return
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(transferTimeout))
	body := &bodyReader{r: http.MaxBytesReader(w, r.Body, a.MaxSnapshotBytes)}
	err := a.Cluster.Restore(r.Context(), body)
	var maxErr *http.MaxBytesError
	switch {
	case err == nil:
		a.Logger.Warn("admin: cluster state restored from a backup", "remote", httpx.ClientAddr(r),
			"correlation_id", httpx.CorrelationID(r.Context()))
		a.recordAdmin(r) // the first event of the restored trail
		w.WriteHeader(http.StatusNoContent)
	case errors.As(body.err, &maxErr):
		tooLarge(w, r, maxErr.Limit)
	case body.err != nil:
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeBadRequest, "the request body could not be read to its end")
	default:
		a.clusterFailed(w, r, "restore", err)
	}
}

func tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	httpx.WriteError(w, r, http.StatusRequestEntityTooLarge, httpx.CodeBadRequest, "backup larger than the limit of "+formatBytes(limit))
}

// clusterFailed answers a Cluster error: a *ClusterError as it says, any
// other error 503.
func (a *api) clusterFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	var ce *ClusterError
	if errors.As(err, &ce) {
		httpx.WriteError(w, r, ce.Status, ce.Code, ce.Message)
		return
	}
	a.unavailable(w, r, what, err)
}

// bodyReader remembers the first read error of the request body, so that a
// failed restore can be told apart from a body that never arrived whole.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func formatBytes(n int64) string {
	const unit = 1 << 10
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= unit && n%unit == 0 && i < len(units)-1 {
		n /= unit
		i++
	}
	return strconv.FormatInt(n, 10) + " " + units[i]
}
