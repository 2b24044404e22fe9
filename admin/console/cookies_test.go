package console

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

// listenerConsole is a console over e's state configured as a node
// configures it for one listener.
func listenerConsole(e *env, issuer string, own bool) *Console {
	key := make([]byte, 32)
	rand.Read(key)
	return New(Config{Issuer: issuer, OwnListener: own, Secret: []byte("node secret"),
		BrowserKey: func() ([]byte, error) { return key, nil },
		Admin: admin.Config{State: e.state, Applier: e.app, Keys: e.keys, Cluster: fakeCluster{},
			Hasher:    password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 2),
			TokenHash: func() string { return admin.HashToken(testToken) }}})
}

// TestCookiesFitTheListener: the console's cookies are Secure (with the
// __Host- prefix and path /) exactly when the browser speaks https on the
// console's listener: over TLS; on the public listener behind a
// TLS-terminating balancer, which the issuer's https scheme says; never
// over plain HTTP on a listener of the console's own (--admin-addr, a
// management network), whatever the issuer says.
func TestCookiesFitTheListener(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		issuer string
		own    bool
		tls    bool
		secure bool
	}{
		{"public listener, http issuer (loopback, development)", "http://127.0.0.1:8080", false, false, false},
		{"public listener behind a TLS-terminating balancer", "https://id.example", false, false, true},
		{"public listener with TLS on the node", "https://id.example", false, true, true},
		{"plain-HTTP admin listener, https issuer", "https://id.example", true, false, false},
		{"plain-HTTP admin listener, http issuer", "http://127.0.0.1:8080", true, false, false},
		{"admin listener with TLS on the node", "https://id.example", true, true, true},
		{"admin listener with TLS, http issuer", "http://127.0.0.1:8080", true, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := listenerConsole(e, tc.issuer, tc.own)
			req := httptest.NewRequest("GET", Prefix+"signin", nil)
			if tc.tls {
				req.TLS = &tls.ConnectionState{}
			}
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, req)
			cks := rec.Result().Cookies()
			if len(cks) != 1 {
				t.Fatalf("got cookies %v, want the CSRF cookie", rec.Result().Header.Values("Set-Cookie"))
			}
			ck := cks[0]
			wantName, wantPath := cookieCSRF, Prefix
			if tc.secure {
				wantName, wantPath = "__Host-"+cookieCSRF, "/"
			}
			if ck.Name != wantName || ck.Path != wantPath || ck.Secure != tc.secure || ck.Domain != "" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
				t.Errorf("got cookie %+v, want %s, Path=%s, Secure %v, no Domain, HttpOnly, SameSite=Strict", ck, wantName, wantPath, tc.secure)
			}
			// The cookie set is the cookie read: posted back with the
			// form's token, the sign-in goes through.
			form := url.Values{"token": {testToken}, "csrf_token": {ck.Value}}
			post := httptest.NewRequest("POST", Prefix+"signin", strings.NewReader(form.Encode()))
			post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			post.TLS = req.TLS
			post.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
			rec = httptest.NewRecorder()
			c.ServeHTTP(rec, post)
			if rec.Code != http.StatusSeeOther {
				t.Fatalf("sign in with the cookie just set: got %d, want 303\n%s", rec.Code, rec.Body)
			}
			for _, ck := range rec.Result().Cookies() {
				if ck.Secure != tc.secure || (tc.secure != strings.HasPrefix(ck.Name, "__Host-")) {
					t.Errorf("session cookie %+v: want Secure %v, with the __Host- prefix exactly when Secure", ck, tc.secure)
				}
			}
		})
	}
}

// TestConsoleOnPlainAdminListener: a browser on a management network signs
// in to the console on a plain-HTTP --admin-addr of a node whose issuer is
// https, and stays signed in; the cookies then are not Secure. Over TLS on
// the same listener they are Secure, with the __Host- prefix.
func TestConsoleOnPlainAdminListener(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		name := "plain HTTP"
		if useTLS {
			name = "TLS"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			mux := http.NewServeMux()
			mux.Handle(Prefix, listenerConsole(e, "https://id.example", true))
			var srv *httptest.Server
			if useTLS {
				srv = httptest.NewTLSServer(httpx.Correlation(mux))
			} else {
				srv = httptest.NewServer(httpx.Correlation(mux))
			}
			t.Cleanup(srv.Close)
			// The browser reaches the node by a name on the management
			// network: a cookie jar, like a browser, takes a loopback
			// address for a secure origin even over plain HTTP.
			tr := srv.Client().Transport.(*http.Transport).Clone()
			tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
			}
			if tr.TLSClientConfig != nil {
				tr.TLSClientConfig.ServerName = "example.com" // httptest's certificate
			}
			_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
			base := "http://node1.mgmt.example:" + port
			if useTLS {
				base = "https://node1.mgmt.example:" + port
			}
			jar, _ := cookiejar.New(nil)
			client := &http.Client{Transport: tr, Jar: jar, Timeout: 10 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			do := func(method, path string, form url.Values) (int, string) {
				t.Helper()
				req, _ := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
				if form != nil {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
				res, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(b)
			}
			do("GET", Prefix+"signin", nil)
			u, _ := url.Parse(base + Prefix)
			var csrf *http.Cookie
			for _, ck := range jar.Cookies(u) {
				if strings.HasSuffix(ck.Name, cookieCSRF) {
					csrf = ck
				}
			}
			if csrf == nil {
				t.Fatal("the browser holds no CSRF cookie after the sign-in page")
			}
			if want := map[bool]string{false: cookieCSRF, true: "__Host-" + cookieCSRF}[useTLS]; csrf.Name != want {
				t.Errorf("got cookie %q, want %q", csrf.Name, want)
			}
			if status, body := do("POST", Prefix+"signin", url.Values{"token": {testToken}, "csrf_token": {csrf.Value}}); status != http.StatusSeeOther {
				t.Fatalf("sign in: got %d, want 303\n%s", status, body)
			}
			if status, body := do("GET", Prefix+"cluster", nil); status != http.StatusOK || !strings.Contains(body, "node-0") {
				t.Fatalf("a page after sign-in: got %d, want 200 with the cluster\n%s", status, body)
			}
		})
	}
}
