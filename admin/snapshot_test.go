package admin

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/internal/httpx"
)

func TestBackupStreamsTheFile(t *testing.T) {
	e := newEnv(t)
	e.cluster.backup = bytes.Repeat([]byte{0xbb, 0x01}, 5000)
	w := e.must(http.StatusOK, "GET", "/admin/v1/snapshot", "")
	if !bytes.Equal(w.Body.Bytes(), e.cluster.backup) {
		t.Fatalf("body: got %d bytes, want the %d of the backup", w.Body.Len(), len(e.cluster.backup))
	}
	if got := w.Header().Get("Content-Disposition"); !strings.HasPrefix(got, `attachment; filename="oidcd-snapshot-20250101T0000`) || !strings.HasSuffix(got, `Z.db"`) {
		t.Errorf("Content-Disposition: got %q, want an attachment named after the clock", got)
	}
	for name, want := range map[string]string{
		"Content-Type":           "application/octet-stream",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := w.Header().Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

func TestBackupErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"no quorum", errors.New("cluster: no leader"), http.StatusServiceUnavailable, httpx.CodeUnavailable},
		{"refused", &ClusterError{Status: http.StatusConflict, Code: httpx.CodeConflict, Message: "no"}, http.StatusConflict, httpx.CodeConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.cluster.backup, e.cluster.backupErr = []byte("data"), tt.err
			w := e.must(tt.status, "GET", "/admin/v1/snapshot", "")
			if got := decodeAs[httpx.Envelope](t, w).Error.Code; got != tt.code {
				t.Fatalf("code: got %q, want %q", got, tt.code)
			}
		})
	}
}

// TestBackupCutShortAbortsTheConnection: once bytes went out, an error can
// no longer be answered; the handler aborts so that the client sees an
// incomplete transfer instead of a short file.
func TestBackupCutShortAbortsTheConnection(t *testing.T) {
	e := newEnv(t)
	e.cluster.backup, e.cluster.backupCut, e.cluster.backupErr = []byte("0123456789"), 4, errors.New("disk on fire")
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/admin/v1/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := srv.Client().Do(req)
	if err == nil {
		// The first bytes may or may not have left the server's buffer.
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("a cut backup: got a complete answer, want an incomplete transfer")
	}
}

func TestRestore(t *testing.T) {
	file := "a state file, as far as the fake knows"
	octet := []string{"Content-Type", "application/octet-stream"}
	tests := []struct {
		name     string
		body     string
		hdr      []string
		chunked  bool
		err      error
		status   int
		code     string
		restored bool
	}{
		{name: "restored", body: file, hdr: octet, status: http.StatusNoContent, restored: true},
		{name: "no content type", body: file, hdr: []string{"Content-Type", ""}, status: http.StatusNoContent, restored: true},
		{name: "json", body: `{"a":1}`, status: http.StatusUnsupportedMediaType, code: httpx.CodeBadRequest},
		{name: "too large", body: strings.Repeat("x", 65), hdr: octet, status: http.StatusRequestEntityTooLarge, code: httpx.CodeBadRequest},
		{name: "too large, chunked", body: strings.Repeat("x", 65), hdr: octet, chunked: true, status: http.StatusRequestEntityTooLarge, code: httpx.CodeBadRequest},
		{name: "not a state file", body: "garbage", hdr: octet,
			err:    &ClusterError{Status: http.StatusBadRequest, Code: httpx.CodeBadRequest, Message: "not a state file"},
			status: http.StatusBadRequest, code: httpx.CodeBadRequest},
		{name: "follower", body: file, hdr: octet,
			err:    &ClusterError{Status: http.StatusConflict, Code: httpx.CodeConflict, Message: "run this against the leader"},
			status: http.StatusConflict, code: httpx.CodeConflict},
		{name: "no quorum", body: file, hdr: octet, err: errors.New("cluster: no leader"),
			status: http.StatusServiceUnavailable, code: httpx.CodeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.MaxSnapshotBytes = 64 })
			e.cluster.restoreErr = tt.err
			r := httptest.NewRequest("POST", "/admin/v1/snapshot", strings.NewReader(tt.body))
			if tt.chunked {
				r = httptest.NewRequest("POST", "/admin/v1/snapshot", io.MultiReader(strings.NewReader(tt.body)))
				r.ContentLength = -1
			}
			r.Header.Set("Authorization", "Bearer "+e.token)
			r.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				if tt.hdr[i+1] == "" {
					r.Header.Del(tt.hdr[i])
				} else {
					r.Header.Set(tt.hdr[i], tt.hdr[i+1])
				}
			}
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status: got %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			if tt.code != "" {
				if got := decodeAs[httpx.Envelope](t, w).Error.Code; got != tt.code {
					t.Fatalf("code: got %q, want %q", got, tt.code)
				}
			}
			if got := e.cluster.restored != nil; got != tt.restored {
				t.Fatalf("restored: got %v, want %v", got, tt.restored)
			}
			if tt.restored && string(e.cluster.restored) != tt.body {
				t.Fatalf("restored body: got %q, want %q", e.cluster.restored, tt.body)
			}
		})
	}
}

func TestSnapshotNeedsTheToken(t *testing.T) {
	e := newEnv(t)
	for _, method := range []string{"GET", "POST"} {
		w := e.do(method, "/admin/v1/snapshot", "", "Authorization", "")
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s without token: got %d, want 401", method, w.Code)
		}
	}
	if e.cluster.restored != nil {
		t.Fatal("restore ran without the token")
	}
}
