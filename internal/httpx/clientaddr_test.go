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
	cases := []struct {
		name   string
		peer   string
		header map[string]string
		want   string
	}{
		{"no header", "10.0.0.1:5000", nil, "10.0.0.1:5000"},
		{"untrusted peer's header is ignored (spoofing)", "203.0.113.9:1", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "203.0.113.9:1"},
		{"untrusted peer's Forwarded is ignored", "203.0.113.9:1", map[string]string{"Forwarded": "for=198.51.100.1"}, "203.0.113.9:1"},
		{"X-Forwarded-For from a trusted proxy", "10.0.0.1:5000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "198.51.100.1:0"},
		{"right-most untrusted wins", "10.0.0.1:5000", map[string]string{"X-Forwarded-For": "6.6.6.6, 198.51.100.1, 10.0.0.2"}, "198.51.100.1:0"},
		{"a client cannot prepend itself past the proxy", "192.0.2.7:1", map[string]string{"X-Forwarded-For": "10.9.9.9, 198.51.100.1"}, "198.51.100.1:0"},
		{"all trusted: the left-most", "10.0.0.1:1", map[string]string{"X-Forwarded-For": "10.0.0.3, 10.0.0.2"}, "10.0.0.3:0"},
		{"Forwarded, quoted IPv6 with port", "10.0.0.1:1", map[string]string{"Forwarded": `for="[2001:db8::17]:4711";proto=https`}, "[2001:db8::17]:0"},
		{"Forwarded wins over X-Forwarded-For", "10.0.0.1:1", map[string]string{"Forwarded": "for=198.51.100.2", "X-Forwarded-For": "198.51.100.3"}, "198.51.100.2:0"},
		{"Forwarded chain", "10.0.0.1:1", map[string]string{"Forwarded": "for=198.51.100.2, for=10.0.0.5"}, "198.51.100.2:0"},
		{"obfuscated hop: believe nothing", "10.0.0.1:1", map[string]string{"Forwarded": "for=_hidden, for=198.51.100.2"}, "198.51.100.2:0"},
		{"unknown right-most: the proxy is the client", "10.0.0.1:1", map[string]string{"Forwarded": "for=unknown"}, "10.0.0.1:1"},
		{"malformed X-Forwarded-For", "10.0.0.1:1", map[string]string{"X-Forwarded-For": "1.2.3.4,,5.6.7.8"}, "10.0.0.1:1"},
		{"IPv6 proxy prefix", "[2001:db8:ffff::1]:443", map[string]string{"X-Forwarded-For": "2001:db8:1::9"}, "[2001:db8:1::9]:0"},
		{"IPv4-mapped peer", "[::ffff:10.0.0.1]:1", map[string]string{"X-Forwarded-For": "198.51.100.4"}, "198.51.100.4:0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got string
			h := TrustedProxies(trusted)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = ClientAddr(r) }))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
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
		a := clientFromHeaders(r, trusted)
		if a != "" {
			if _, ok := addrOf(a); !ok {
				t.Fatalf("decided %q, which is not an address", a)
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
