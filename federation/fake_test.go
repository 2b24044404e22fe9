package federation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/oidcd/oidcd/internal/testkit/testclock"
)

// A fake upstream OpenID provider for the tests: a discovery document, a
// JWKS and a token endpoint on a loopback httptest server, all of which a
// test may change while it runs.

const (
	testClientID     = "oidcd-test"
	testClientSecret = "s3cret:with%odd+chars"
	testRedirect     = "https://oidcd.example/federation/up/callback"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// signer is a private key the fake signs with.
type signer struct {
	kid string
	alg jwa.SignatureAlgorithm
	key jwk.Key // private
}

func (s signer) public(t testing.TB) jwk.Key {
	t.Helper()
	pk, err := jwk.PublicKeyOf(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

var (
	keysOnce          sync.Once
	rsaPriv, rsaPriv2 *rsa.PrivateKey
	ecPriv            *ecdsa.PrivateKey
	rsaSmall          *rsa.PrivateKey // 1024 bits: never trusted
	keysErr           error
)

func testKeys(t testing.TB) (r1, r2 *rsa.PrivateKey, ec *ecdsa.PrivateKey) {
	t.Helper()
	keysOnce.Do(func() {
		if rsaPriv, keysErr = rsa.GenerateKey(rand.Reader, 2048); keysErr != nil {
			return
		}
		if rsaPriv2, keysErr = rsa.GenerateKey(rand.Reader, 2048); keysErr != nil {
			return
		}
		if rsaSmall, keysErr = rsa.GenerateKey(rand.Reader, 1024); keysErr != nil {
			return
		}
		ecPriv, keysErr = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	})
	if keysErr != nil {
		t.Fatal(keysErr)
	}
	return rsaPriv, rsaPriv2, ecPriv
}

// newSigner wraps raw as a JWK with kid and alg (set on the key, so the
// JWKS carries it too, when setAlg).
func newSigner(t testing.TB, raw any, kid string, alg jwa.SignatureAlgorithm, setAlg bool) signer {
	t.Helper()
	k, err := jwk.FromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	if kid != "" {
		_ = k.Set(jwk.KeyIDKey, kid)
	}
	if setAlg {
		_ = k.Set(jwk.AlgorithmKey, alg)
	}
	_ = k.Set(jwk.KeyUsageKey, "sig")
	return signer{kid: kid, alg: alg, key: k}
}

// sign makes a compact JWS of claims under s, with extra protected
// headers (a nil value removes one).
func sign(t testing.TB, s signer, claims map[string]any, hdr map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return signBytes(t, s, payload, hdr)
}

// signBytes is sign of any payload.
func signBytes(t testing.TB, s signer, payload []byte, hdr map[string]any) string {
	t.Helper()
	h := jws.NewHeaders()
	if s.kid != "" {
		_ = h.Set(jws.KeyIDKey, s.kid)
	}
	for k, v := range hdr {
		if v == nil {
			_ = h.Remove(k)
			continue
		}
		_ = h.Set(k, v)
	}
	out, err := jws.Sign(payload, jws.WithKey(s.alg, s.key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// unsigned is a token with alg none (and no signature).
func unsigned(claims map[string]any) string {
	h, _ := json.Marshal(map[string]any{"alg": "none", "kid": "k1"})
	p, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// fakeOP is the upstream.
type fakeOP struct {
	t      testing.TB
	srv    *httptest.Server
	issuer string
	clock  *testclock.Clock

	mu sync.Mutex
	// doc is the discovery document; issuer and the endpoints are filled in.
	doc       map[string]any
	docStatus int // 0: 200
	docCache  string
	docBody   []byte // when set, served instead of doc
	keys      []jwk.Key
	keyStatus int
	keyCache  string
	// signer signs the ID tokens the token endpoint returns.
	signer signer
	// claims change the ID token's claims (nil: the defaults); header adds
	// to its protected header.
	claims func(map[string]any)
	header map[string]any
	// tokenHandler replaces the token endpoint when set.
	tokenHandler http.HandlerFunc
	// delay holds every answer back (to test timeouts).
	delay time.Duration
	// extra serves more paths.
	extra map[string]http.HandlerFunc

	nonce    string // the nonce the ID token carries (the test's AuthRequest's)
	hits     map[string]int
	tokenReq url.Values
	authz    string // the Authorization header of the last token request
}

func newFakeOP(t testing.TB, clock *testclock.Clock) *fakeOP {
	t.Helper()
	r1, _, _ := testKeys(t)
	op := &fakeOP{t: t, clock: clock, hits: map[string]int{}}
	op.signer = newSigner(t, r1, "k1", jwa.RS256, true)
	op.keys = []jwk.Key{op.signer.public(t)}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", op.serveDoc)
	mux.HandleFunc("/jwks", op.serveKeys)
	mux.HandleFunc("/token", op.serveToken)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		op.mu.Lock()
		h := op.extra[r.URL.Path]
		op.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	})
	op.srv = httptest.NewServer(op.wrap(mux))
	t.Cleanup(op.srv.Close)
	op.issuer = op.srv.URL
	op.doc = map[string]any{
		"issuer":                                op.issuer,
		"authorization_endpoint":                op.issuer + "/authorize",
		"token_endpoint":                        op.issuer + "/token",
		"jwks_uri":                              op.issuer + "/jwks",
		"end_session_endpoint":                  op.issuer + "/logout",
		"response_types_supported":              []string{"code"},
		"code_challenge_methods_supported":      []string{"S256"},
		"id_token_signing_alg_values_supported": []string{"RS256", "PS256", "ES256"},
		"subject_types_supported":               []string{"public"},
	}
	return op
}

func (op *fakeOP) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op.mu.Lock()
		op.hits[r.URL.Path]++
		d := op.delay
		op.mu.Unlock()
		if d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (op *fakeOP) upstream() Upstream {
	return Upstream{Issuer: op.issuer, ClientID: testClientID, ClientSecret: testClientSecret}
}

func (op *fakeOP) hitsOf(path string) int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.hits[path]
}

func (op *fakeOP) set(f func(op *fakeOP)) {
	op.mu.Lock()
	defer op.mu.Unlock()
	f(op)
}

func (op *fakeOP) serveDoc(w http.ResponseWriter, r *http.Request) {
	op.mu.Lock()
	status, cc, body := op.docStatus, op.docCache, op.docBody
	if body == nil {
		body, _ = json.Marshal(op.doc)
	}
	op.mu.Unlock()
	if cc != "" {
		w.Header().Set("Cache-Control", cc)
	}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		w.WriteHeader(status)
	}
	w.Write(body)
}

func (op *fakeOP) serveKeys(w http.ResponseWriter, r *http.Request) {
	op.mu.Lock()
	status, cc := op.keyStatus, op.keyCache
	set := jwk.NewSet()
	for _, k := range op.keys {
		_ = set.AddKey(k)
	}
	op.mu.Unlock()
	if cc != "" {
		w.Header().Set("Cache-Control", cc)
	}
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	json.NewEncoder(w).Encode(set)
}

// idClaims are the ID token's claims as the fake would issue them now.
func (op *fakeOP) idClaims() map[string]any {
	now := op.clock.Now()
	c := map[string]any{
		"iss":            op.issuer,
		"aud":            testClientID,
		"sub":            "alice-at-upstream",
		"exp":            now.Add(5 * time.Minute).Unix(),
		"iat":            now.Unix(),
		"nonce":          op.nonce,
		"email":          "alice@example.com",
		"email_verified": true,
		"name":           "Alice",
		"amr":            []string{"pwd", "mfa"},
		"sid":            "upstream-session-1",
		"groups":         []string{"staff", "admins"},
	}
	if op.claims != nil {
		op.claims(c)
	}
	return c
}

func (op *fakeOP) serveToken(w http.ResponseWriter, r *http.Request) {
	op.mu.Lock()
	h := op.tokenHandler
	op.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	op.mu.Lock()
	op.tokenReq = r.PostForm
	op.authz = r.Header.Get("Authorization")
	claims := op.idClaims()
	s, hdr := op.signer, op.header
	op.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"access_token": "at",
		"token_type":   "Bearer",
		"expires_in":   300,
		"id_token":     sign(op.t, s, claims, hdr),
	})
}

// newTestClient is a client of op's kind with the test clock.
func newTestClient(clock *testclock.Clock, opts Options) *Client {
	opts.Now = clock.Now
	return NewClient(opts)
}
