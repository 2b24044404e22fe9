package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/keys"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func get(t testing.TB, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestDiscovery(t *testing.T) {
	tests := []struct {
		name, issuer, base string
	}{
		{"plain issuer", "https://id.example.com", "https://id.example.com"},
		{"trailing slash stripped from endpoints", "https://id.example.com/", "https://id.example.com"},
		{"issuer with a path", "http://127.0.0.1:8080/tenant", "http://127.0.0.1:8080/tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(t, DiscoveryHandler(tt.issuer), PathDiscovery)
			if rec.Code != http.StatusOK {
				t.Fatalf("status: got %d, want 200", rec.Code)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", got)
			}
			var doc map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			wantStr := map[string]string{
				"issuer":                 tt.issuer,
				"authorization_endpoint": tt.base + "/authorize",
				"token_endpoint":         tt.base + "/oauth2/token",
				"userinfo_endpoint":      tt.base + "/userinfo",
				"jwks_uri":               tt.base + "/.well-known/jwks.json",
				"revocation_endpoint":    tt.base + "/oauth2/revoke",
				"introspection_endpoint": tt.base + "/oauth2/introspect",
				"end_session_endpoint":   tt.base + "/logout",
			}
			for k, want := range wantStr {
				if got := doc[k]; got != want {
					t.Errorf("%s: got %v, want %q", k, got, want)
				}
			}
			for _, k := range []string{"backchannel_logout_supported", "backchannel_logout_session_supported"} {
				if got := doc[k]; got != true {
					t.Errorf("%s: got %v, want true", k, got)
				}
			}
			wantList := map[string][]string{
				"grant_types_supported":                 {"authorization_code"},
				"response_types_supported":              {"code"},
				"code_challenge_methods_supported":      {"S256"},
				"subject_types_supported":               {"public"},
				"id_token_signing_alg_values_supported": {"RS256"},
				"acr_values_supported":                  {"urn:service:sso:acr:pwd", "urn:service:sso:acr:mfa", "urn:service:sso:acr:phone"},
				"prompt_values_supported":               {"none", "login", "select_account"},
				"claims_supported":                      {"sub", "iss", "aud", "exp", "iat", "auth_time", "amr", "acr", "sid", "organization_id", "email", "email_verified"},
				// Beyond the required fields: what OpenID Connect Discovery and RFC
				// 8414 recommend, as the node behaves.
				"scopes_supported":                              {"openid", "email", "profile"},
				"token_endpoint_auth_methods_supported":         {"client_secret_basic", "client_secret_post", "none"},
				"introspection_endpoint_auth_methods_supported": {"client_secret_basic", "client_secret_post"},
				"revocation_endpoint_auth_methods_supported":    {"client_secret_basic", "client_secret_post"},
				"ui_locales_supported":                          {"en", "de", "fr", "es", "ja"},
			}
			if got := doc["authorization_response_iss_parameter_supported"]; got != true {
				t.Errorf("authorization_response_iss_parameter_supported: got %v, want true", got)
			}
			for k, want := range wantList {
				var got []string
				for _, v := range doc[k].([]any) {
					got = append(got, v.(string))
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
			if got, want := len(doc), len(wantStr)+3+len(wantList); got != want {
				t.Errorf("fields: got %d, want %d (the required fields and the additions)", got, want)
			}
		})
	}
	golden(t, "discovery.json", indent(t, get(t, DiscoveryHandler("https://id.example.com"), PathDiscovery).Body.Bytes()))
}

func newKeys(t testing.TB) (*keys.Manager, *fsmtest.Applier) {
	t.Helper()
	a := fsmtest.New(t)
	m := keys.New(keys.Config{State: a.State(), Applier: a})
	a.FSM.OnApply = m.OnApply
	return m, a
}

var masked = regexp.MustCompile(`"(n|kid)": "[A-Za-z0-9_-]+"`)

func TestJWKSHandler(t *testing.T) {
	m, _ := newKeys(t)
	h := JWKSHandler(m, nil)

	rec := get(t, h, PathJWKS)
	if rec.Code != http.StatusServiceUnavailable || rec.Body.Len() != 0 {
		t.Errorf("before any key: got %d with %d body bytes, want 503 and no body", rec.Code, rec.Body.Len())
	}
	if got := rec.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("503 Cache-Control: got %q, want no-store", got)
	}

	ctx := context.Background()
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Rotate(ctx, false); err != nil {
		t.Fatal(err)
	}
	rec = get(t, h, PathJWKS)
	if rec.Code != http.StatusOK {
		t.Fatalf("status: got %d, want 200", rec.Code)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=300"} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	golden(t, "jwks.json", masked.ReplaceAll(indent(t, rec.Body.Bytes()), []byte(`"$1": "<$1>"`)))

	// A relying party verifies our token against the served bytes.
	tok, err := m.Sign(map[string]any{"sub": "u", "exp": time.Now().Add(time.Minute).Unix()}, keys.TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	set, err := jwk.Parse(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 2 {
		t.Errorf("keys: got %d, want 2 (active and next)", set.Len())
	}
	if _, err := jwt.Parse(tok, jwt.WithKeySet(set)); err != nil {
		t.Errorf("token does not verify against the served JWKS: %v", err)
	}
}

type failingSource struct{ err error }

func (f failingSource) JWKS() ([]byte, error) { return nil, f.err }

func TestJWKSHandlerUnavailable(t *testing.T) {
	for _, err := range []error{keys.ErrNoKey, errors.New("bbolt: database not open")} {
		rec := get(t, JWKSHandler(failingSource{err}, nil), PathJWKS)
		if rec.Code != http.StatusServiceUnavailable || rec.Body.Len() != 0 {
			t.Errorf("%v: got %d with body %q, want 503 and no body", err, rec.Code, rec.Body)
		}
	}
}

// TestRelyingParty runs go-oidc, an independent client, against the two
// handlers: discovery must satisfy its issuer check and an ID token signed
// by package keys must verify through the jwks_uri.
func TestRelyingParty(t *testing.T) {
	m, _ := newKeys(t)
	if err := m.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.Handle("GET "+PathDiscovery, DiscoveryHandler(srv.URL))
	mux.Handle("GET "+PathJWKS, JWKSHandler(m, nil))

	ctx := context.Background()
	p, err := gooidc.NewProvider(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	idToken, err := m.Sign(map[string]any{
		"iss": srv.URL, "sub": "user-1", "aud": []string{"client-1"},
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
	}, keys.TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Verifier(&gooidc.Config{ClientID: "client-1"}).Verify(ctx, string(idToken))
	if err != nil {
		t.Fatalf("go-oidc rejects our ID token: %v", err)
	}
	if got.Subject != "user-1" {
		t.Errorf("sub: got %q, want user-1", got.Subject)
	}
}

func BenchmarkDiscovery(b *testing.B) {
	h := DiscoveryHandler("https://id.example.com")
	req := httptest.NewRequest(http.MethodGet, PathDiscovery, nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

func BenchmarkJWKSHandler(b *testing.B) {
	m, _ := newKeys(b)
	if err := m.Tick(context.Background()); err != nil {
		b.Fatal(err)
	}
	h := JWKSHandler(m, nil)
	req := httptest.NewRequest(http.MethodGet, PathJWKS, nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
