package console

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

// TestPagesReadLinearizably: the console reads through its in-process
// admin API with the node's admin.Config, ReadIndex included, so an
// operator who has just created something through any node sees it on
// the next page; when no leader can vouch for the state, the page is an
// error, not a stale list.
func TestPagesReadLinearizably(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int64
	var fail atomic.Bool
	key := make([]byte, 32)
	rand.Read(key)
	ac := admin.Config{
		State:     e.state,
		Applier:   e.app,
		Keys:      e.keys,
		Cluster:   fakeCluster{},
		Hasher:    password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 2),
		TokenHash: func() string { return e.token.Load().(string) },
		Guard:     admin.NewGuard(nil),
		ReadIndex: func(context.Context) error {
			calls.Add(1)
			if fail.Load() {
				return errors.New("no leader")
			}
			return nil
		},
	}
	e.console = New(Config{Issuer: "http://127.0.0.1", Secret: []byte("node secret"), BrowserKey: func() ([]byte, error) { return key, nil }, Admin: ac})
	mux := http.NewServeMux()
	mux.Handle(Prefix, e.console)
	e.srv = httptest.NewServer(httpx.Correlation(mux))
	t.Cleanup(e.srv.Close)
	e.signIn()

	calls.Store(0)
	wantStatus(t, "organizations", e.get(Prefix+"organizations"), http.StatusOK)
	if calls.Load() == 0 {
		t.Fatalf("the organizations page read without a read index")
	}
	fail.Store(true)
	wantStatus(t, "organizations without a read index to be had", e.get(Prefix+"organizations"), http.StatusServiceUnavailable)
}
