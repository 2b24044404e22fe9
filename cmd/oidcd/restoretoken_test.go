package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRestoreKeepsTheAdminTokenOfTheEnvironment is issue 32's case with the
// binary: a node whose admin token comes from OIDCD_ADMIN_TOKEN, as the
// operator guide says, is backed up, and the backup is restored on a node
// started with the defaults (a generated token in <data-dir>/admin-token);
// and the other way round. Right after the restore, with no restart, the
// backed-up node's token works, the restoring node's own token answers 401,
// and the restoring node's log says which of its tokens no longer matches.
func TestRestoreKeepsTheAdminTokenOfTheEnvironment(t *testing.T) {
	cases := []struct {
		name           string
		backedUpEnv    bool // the backed-up node's token is OIDCD_ADMIN_TOKEN (else generated)
		restoringEnv   bool // the restoring node's token is OIDCD_ADMIN_TOKEN (else generated)
		wantLogSaysOld string
	}{
		{"env into generated", true, false, "the token in the token file is no longer the cluster's admin token"},
		{"generated into env", false, true, "--admin-token (or OIDCD_ADMIN_TOKEN) does not match the cluster's admin token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			backedUp := startNodeWith(t, tc.backedUpEnv)
			backedUp.admin(t, http.StatusCreated, "POST", "/organizations", map[string]any{"slug": "in-backup", "name": "In backup"}, nil)
			status, backup := tokenCall(t, backedUp.issuer, backedUp.token, "GET", "/snapshot", nil)
			if status != http.StatusOK {
				t.Fatalf("GET /snapshot: %d %s", status, backup)
			}

			restoring := startNodeWith(t, tc.restoringEnv)
			if restoring.token == backedUp.token {
				t.Fatal("both nodes have the same token; the test needs two")
			}
			if status, b := tokenCall(t, restoring.issuer, restoring.token, "POST", "/snapshot", backup); status != http.StatusNoContent {
				t.Fatalf("POST /snapshot: %d %s", status, b)
			}
			if status, b := tokenCall(t, restoring.issuer, backedUp.token, "GET", "/organizations", nil); status != http.StatusOK || !strings.Contains(string(b), `"in-backup"`) {
				t.Fatalf("the backed-up node's token after the restore: got %d %s, want 200 with the backup's organization", status, b)
			}
			if status, b := tokenCall(t, restoring.issuer, restoring.token, "GET", "/organizations", nil); status != http.StatusUnauthorized {
				t.Fatalf("the restoring node's own token after the restore: got %d %s, want 401", status, b)
			}
			logFile := filepath.Join(restoring.dir, "node.log")
			deadline := time.Now().Add(5 * time.Second)
			for {
				b, _ := os.ReadFile(logFile)
				if bytes.Contains(b, []byte(tc.wantLogSaysOld)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the restoring node's log does not say %q within 5 s", tc.wantLogSaysOld)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// tokenCall sends an admin API request with token; body, when set, is a
// backup.
func tokenCall(t *testing.T, issuer, token, method, path string, body []byte) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, issuer+"/admin/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
