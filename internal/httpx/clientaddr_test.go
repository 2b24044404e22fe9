package httpx

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.7, 2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	const bad = "400"
	xff, fwd := ProxyXForwardedFor, ProxyForwarded
	cases := []struct {
		name   string
		way    ProxyHeader
		peer   string
		header []string // name, value, ...
		want   string   // the client address, or bad for a 400
	}{
		{"no header", xff, "10.0.0.1:5000", nil, "10.0.0.1:5000"},
		{"untrusted peer's header is ignored (spoofing)", xff, "203.0.113.9:1", []string{"X-Forwarded-For", "198.51.100.1"}, "203.0.113.9:1"},
		{"untrusted peer's Forwarded is ignored", fwd, "203.0.113.9:1", []string{"Forwarded", "for=198.51.100.1"}, "203.0.113.9:1"},
		{"untrusted peer's malformed header is ignored", xff, "203.0.113.9:1", []string{"X-Forwarded-For", ","}, "203.0.113.9:1"},
		{"X-Forwarded-For from a trusted proxy", xff, "10.0.0.1:5000", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1:0"},
		{"right-most untrusted wins", xff, "10.0.0.1:5000", []string{"X-Forwarded-For", "6.6.6.6, 198.51.100.1, 10.0.0.2"}, "198.51.100.1:0"},
		{"a client cannot prepend itself past the proxy", xff, "192.0.2.7:1", []string{"X-Forwarded-For", "10.9.9.9, 198.51.100.1"}, "198.51.100.1:0"},
		{"all trusted: the left-most", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "10.0.0.3, 10.0.0.2"}, "10.0.0.3:0"},
		{"two header lines are one chain", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "6.6.6.6", "x-forwarded-for", "198.51.100.5"}, "198.51.100.5:0"},
		// The balancer writes X-Forwarded-For and passes a client's
		// Forwarded through: with the default way the client's
		// Forwarded names nothing (Security III, defect 1).
		{"x-forwarded-for ignores a client's Forwarded", xff, "10.0.0.1:1", []string{"Forwarded", "for=198.51.100.50", "X-Forwarded-For", "198.51.100.3"}, "198.51.100.3:0"},
		{"x-forwarded-for: a Forwarded alone names nothing", xff, "10.0.0.1:1", []string{"Forwarded", "for=198.51.100.50"}, "10.0.0.1:1"},
		{"forwarded ignores a client's X-Forwarded-For", fwd, "10.0.0.1:1", []string{"Forwarded", "for=198.51.100.2", "X-Forwarded-For", "198.51.100.50"}, "198.51.100.2:0"},
		{"forwarded: an X-Forwarded-For alone names nothing", fwd, "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.50"}, "10.0.0.1:1"},
		{"Forwarded, quoted IPv6 with port", fwd, "10.0.0.1:1", []string{"Forwarded", `for="[2001:db8::17]:4711";proto=https`}, "[2001:db8::17]:0"},
		{"Forwarded chain", fwd, "10.0.0.1:1", []string{"Forwarded", "for=198.51.100.2, for=10.0.0.5"}, "198.51.100.2:0"},
		{"obfuscated hop left of the client: believe nothing left of it", fwd, "10.0.0.1:1", []string{"Forwarded", "for=_hidden, for=198.51.100.2"}, "198.51.100.2:0"},
		{"obfuscated client: refused", fwd, "10.0.0.1:1", []string{"Forwarded", "for=198.51.100.2, for=_hidden"}, bad},
		{"unknown right-most: refused, never the balancer's bucket", fwd, "10.0.0.1:1", []string{"Forwarded", "for=unknown"}, bad},
		{"Forwarded element without for=: refused", fwd, "10.0.0.1:1", []string{"Forwarded", "proto=https"}, bad},
		{"empty element left of the client: never reached", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "1.2.3.4,,5.6.7.8"}, "5.6.7.8:0"},
		{"a client's own garbage before the balancer's entry", xff, "10.0.0.1:1", []string{"X-Forwarded-For", ", me", "x-forwarded-for", "198.51.100.6"}, "198.51.100.6:0"},
		{"empty element where the client should be: refused", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "1.2.3.4, , 10.0.0.2"}, bad},
		{"Forwarded element without for= left of the client: never reached", fwd, "10.0.0.1:1", []string{"Forwarded", "proto=http, for=198.51.100.2"}, "198.51.100.2:0"},
		{"X-Forwarded-For of a comma: refused", xff, "10.0.0.1:1", []string{"X-Forwarded-For", ","}, bad},
		{"X-Forwarded-For not an address: refused", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "me"}, bad},
		{"IPv6 proxy prefix", xff, "[2001:db8:ffff::1]:443", []string{"X-Forwarded-For", "2001:db8:1::9"}, "[2001:db8:1::9]:0"},
		{"IPv4-mapped peer", xff, "[::ffff:10.0.0.1]:1", []string{"X-Forwarded-For", "198.51.100.4"}, "198.51.100.4:0"},
		{"proxy-protocol: headers name nothing", ProxyProtocol, "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.4", "Forwarded", "for=198.51.100.5"}, "10.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ""
			h := TrustedProxies(trusted, c.way)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = ClientAddr(r) }))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for i := 0; i+1 < len(c.header); i += 2 {
				r.Header.Add(c.header[i], c.header[i+1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if c.want == bad {
				if w.Code != http.StatusBadRequest || got != "" || !strings.Contains(w.Body.String(), `"BAD_REQUEST"`) {
					t.Fatalf("got %d %q (handler saw %q), want 400 BAD_REQUEST before the handler", w.Code, w.Body.String(), got)
				}
				return
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestParseProxyHeader(t *testing.T) {
	for in, want := range map[string]ProxyHeader{"": ProxyXForwardedFor, "x-forwarded-for": ProxyXForwardedFor,
		"Forwarded": ProxyForwarded, "proxy-protocol": ProxyProtocol} {
		if got, err := ParseProxyHeader(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"x-real-ip", "both", "proxy"} {
		if _, err := ParseProxyHeader(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "not-an-ip", "10.0.0.1/8/8"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if p, err := ParseTrustedProxies(""); err != nil || len(p) != 0 {
		t.Errorf("empty: %v %v", p, err)
	}
}

func FuzzClientAddr(f *testing.F) {
	f.Add("10.0.0.1:1", "for=1.2.3.4, for=\"[::1]:3\"", "5.6.7.8")
	f.Add("10.0.0.1:1", "", "a,,b")
	trusted, _ := ParseTrustedProxies("10.0.0.0/8")
	f.Fuzz(func(t *testing.T, peer, fwd, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("Forwarded", fwd)
		r.Header.Set("X-Forwarded-For", xff)
		for _, header := range []string{"Forwarded", "X-Forwarded-For"} {
			a, err := clientFromHeader(r, trusted, header)
			if a != "" && err != nil {
				t.Fatalf("both an address %q and an error %v", a, err)
			}
			if a != "" {
				if _, ok := addrOf(a); !ok {
					t.Fatalf("decided %q, which is not an address", a)
				}
			}
		}
	})
}

// TestOnlyClientAddrReadsTheConnectionsAddress: no product code outside
// this package reads an http.Request's RemoteAddr; every per-address rule
// and log line goes through ClientAddr.
func TestOnlyClientAddrReadsTheConnectionsAddress(t *testing.T) {
	root := "../.."
	var offenders []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if strings.Contains(filepath.ToSlash(path), "internal/httpx/") || strings.Contains(filepath.ToSlash(path), "cmd/oidcd-bench/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, ".RemoteAddr") && !strings.Contains(line, ".RemoteAddr()") && !strings.Contains(line, "= httpx.ClientAddr(") {
				offenders = append(offenders, fmt.Sprintf("%s:%d: %s", path, i+1, strings.TrimSpace(line)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offenders) > 0 {
		t.Fatalf("read RemoteAddr instead of httpx.ClientAddr:\n%s", strings.Join(offenders, "\n"))
	}
}
