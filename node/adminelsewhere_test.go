package node

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/internal/httpx"
)

// TestAdminElsewhereSaysWhereTheAdminAPIIs: on a public listener whose
// node has --admin-addr, /admin/v1/ answers 404 in the admin API's error
// envelope naming --admin-addr (not the address), and `oidcd admin`
// aimed there prints it; other unknown paths keep the mux's plain 404.
func TestAdminElsewhereSaysWhereTheAdminAPIIs(t *testing.T) {
	mux := http.NewServeMux()
	adminElsewhere(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, path := range []string{"/admin/v1/status", "/admin/v1/organizations?page=1", "/admin/v1/"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var env httpx.Envelope
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || err != nil || env.Error.Code != httpx.CodeNotFound || !strings.Contains(env.Error.Message, "--admin-addr") {
			t.Errorf("GET %s: got %d %+v (%v), want 404 %s naming --admin-addr", path, resp.StatusCode, env.Error, err, httpx.CodeNotFound)
		}
	}
	resp, err := http.Get(srv.URL + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.Contains(resp.Header.Get("Content-Type"), "json") {
		t.Errorf("GET /nothing: got %d %s, want the mux's plain 404", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"--addr", strings.TrimPrefix(srv.URL, "http://"), "--token", strings.Repeat("t", 44), "status"},
		func(string) string { return "" }, nil, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), adminElsewhereMessage) {
		t.Errorf("oidcd admin status at the public address: got exit %d, stderr %q; want a failure that says %q", code, errb.String(), adminElsewhereMessage)
	}
}
