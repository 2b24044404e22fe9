package federation

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/oidcd/oidcd/internal/testkit/testclock"
)

// signIn runs one sign-in's exchange against op with a fresh AuthRequest,
// the code "code-1" and the iss parameter iss.
func signIn(t *testing.T, c *Client, op *fakeOP, iss string) (*IDToken, error) {
	t.Helper()
	ar := NewAuthRequest()
	op.set(func(op *fakeOP) { op.nonce = ar.Nonce })
	return c.Exchange(context.Background(), op.upstream(), testRedirect, ar, Callback{Code: "code-1", State: ar.State, Iss: iss})
}

// kindOf names the one kind err matches, and fails when it matches none
// or several.
func kindOf(t *testing.T, err error) error {
	t.Helper()
	var found []error
	for _, k := range []error{ErrUnreachable, ErrInvalid, ErrUpstream, ErrConfig} {
		if errors.Is(err, k) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("error %v matches kinds %v, want exactly one", err, found)
	}
	return found[0]
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	if got := kindOf(t, err); got != kind {
		t.Fatalf("error %v is of kind %v, want %v", err, got, kind)
	}
}

func TestExchangeHappyPath(t *testing.T) {
	r1, _, ec := testKeys(t)
	for _, tc := range []struct {
		name   string
		signer func(t *testing.T) signer
	}{
		{"RS256", func(t *testing.T) signer { return newSigner(t, r1, "rs", jwa.RS256, true) }},
		{"PS256", func(t *testing.T) signer { return newSigner(t, r1, "ps", jwa.PS256, true) }},
		{"ES256", func(t *testing.T) signer { return newSigner(t, ec, "es", jwa.ES256, true) }},
		{"RS256, key without alg", func(t *testing.T) signer { return newSigner(t, r1, "rs", jwa.RS256, false) }},
		{"PS256, key without alg", func(t *testing.T) signer { return newSigner(t, r1, "ps", jwa.PS256, false) }},
		{"ES256, no kid, one key", func(t *testing.T) signer { return newSigner(t, ec, "", jwa.ES256, true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			s := tc.signer(t)
			op.set(func(op *fakeOP) { op.signer, op.keys = s, []jwk.Key{s.public(t)} })
			c := newTestClient(clock, Options{})
			tok, err := signIn(t, c, op, "")
			if err != nil {
				t.Fatal(err)
			}
			if tok.Subject != "alice-at-upstream" || tok.Email != "alice@example.com" || !tok.EmailVerified || tok.Name != "Alice" || tok.SID != "upstream-session-1" {
				t.Errorf("token %+v", tok)
			}
			if strings.Join(tok.AMR, " ") != "pwd mfa" || strings.Join(StringsClaim(tok.Claims, "groups"), " ") != "staff admins" {
				t.Errorf("amr %v, groups %v", tok.AMR, StringsClaim(tok.Claims, "groups"))
			}
			if !tok.IssuedAt.Equal(t0) || !tok.Expiry.Equal(t0.Add(5*time.Minute)) || !tok.AuthTime.IsZero() {
				t.Errorf("iat %v exp %v auth_time %v", tok.IssuedAt, tok.Expiry, tok.AuthTime)
			}
			if tok.Raw == "" || strings.Count(tok.Raw, ".") != 2 {
				t.Errorf("raw %q", tok.Raw)
			}
		})
	}
}

func TestEmailVerified(t *testing.T) {
	for _, tc := range []struct {
		value any
		want  bool
	}{{true, true}, {"true", true}, {false, false}, {"false", false}, {"TRUE", false}, {1, false}, {nil, false}} {
		clock := testclock.New(t0)
		op := newFakeOP(t, clock)
		op.set(func(op *fakeOP) {
			op.claims = func(c map[string]any) {
				if tc.value == nil {
					delete(c, "email_verified")
				} else {
					c["email_verified"] = tc.value
				}
			}
		})
		tok, err := signIn(t, newTestClient(clock, Options{}), op, "")
		if err != nil {
			t.Fatal(err)
		}
		if tok.EmailVerified != tc.want {
			t.Errorf("email_verified %#v: %v, want %v", tc.value, tok.EmailVerified, tc.want)
		}
	}
}

func TestTokenRequest(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	ar := NewAuthRequest()
	authURL, err := c.AuthorizeURL(context.Background(), op.upstream(), testRedirect, ar, AuthorizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	challenge := u.Query().Get("code_challenge")
	op.set(func(op *fakeOP) { op.nonce = ar.Nonce })
	if _, err := c.Exchange(context.Background(), op.upstream(), testRedirect, ar, Callback{Code: "the-code", State: ar.State}); err != nil {
		t.Fatal(err)
	}
	op.mu.Lock()
	form := op.tokenReq
	op.mu.Unlock()
	sum := sha256.Sum256([]byte(form.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
		t.Errorf("code_verifier %q does not match code_challenge %q", form.Get("code_verifier"), challenge)
	}
	if form.Get("grant_type") != "authorization_code" || form.Get("code") != "the-code" || form.Get("redirect_uri") != testRedirect {
		t.Errorf("token request %v", form)
	}
}

func TestTokenEndpointAuth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		methods any // token_endpoint_auth_methods_supported; nil: absent
		secret  string
		want    string // basic, post, none, or "" for a refusal
	}{
		{"absent list means basic", nil, testClientSecret, "basic"},
		{"basic listed", []string{"client_secret_basic"}, testClientSecret, "basic"},
		{"both listed", []string{"client_secret_post", "client_secret_basic"}, testClientSecret, "basic"},
		{"only post", []string{"client_secret_post", "private_key_jwt"}, testClientSecret, "post"},
		{"neither", []string{"private_key_jwt"}, testClientSecret, ""},
		{"no secret: public client", nil, "", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			if tc.methods != nil {
				op.set(func(op *fakeOP) { op.doc["token_endpoint_auth_methods_supported"] = tc.methods })
			}
			c := newTestClient(clock, Options{})
			ar := NewAuthRequest()
			op.set(func(op *fakeOP) { op.nonce = ar.Nonce })
			up := op.upstream()
			up.ClientSecret = tc.secret
			_, err := c.Exchange(context.Background(), up, testRedirect, ar, Callback{Code: "c", State: ar.State})
			if tc.want == "" {
				wantKind(t, err, ErrInvalid)
				if op.hitsOf("/token") != 0 {
					t.Error("the token endpoint was called")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			op.mu.Lock()
			form, authz := op.tokenReq, op.authz
			op.mu.Unlock()
			switch tc.want {
			case "basic":
				b64, ok := strings.CutPrefix(authz, "Basic ")
				dec, err := base64.StdEncoding.DecodeString(b64)
				if !ok || err != nil {
					t.Fatalf("Authorization %q", authz)
				}
				id, secret, _ := strings.Cut(string(dec), ":")
				// RFC 6749 2.3.1: form-urlencoded before base64.
				if want := url.QueryEscape(testClientID) + ":" + url.QueryEscape(testClientSecret); string(dec) != want {
					t.Errorf("basic credentials %q, want %q", dec, want)
				}
				if id, _ = url.QueryUnescape(id); id != testClientID {
					t.Errorf("id %q", id)
				}
				if secret, _ = url.QueryUnescape(secret); secret != testClientSecret {
					t.Errorf("secret %q", secret)
				}
				if form.Has("client_secret") || form.Has("client_id") {
					t.Errorf("basic also sent credentials in the body: %v", form)
				}
			case "post":
				if authz != "" || form.Get("client_id") != testClientID || form.Get("client_secret") != testClientSecret {
					t.Errorf("post: Authorization %q, form %v", authz, form)
				}
			case "none":
				if authz != "" || form.Get("client_id") != testClientID || form.Has("client_secret") {
					t.Errorf("none: Authorization %q, form %v", authz, form)
				}
			}
		})
	}
}

func TestIDTokenChecks(t *testing.T) {
	r1, r2, _ := testKeys(t)
	for _, tc := range []struct {
		name   string
		claims func(c map[string]any)
		header map[string]any
		signer func(t *testing.T) signer
		raw    func(t *testing.T, claims map[string]any) string // replaces the signed token
		ok     bool
	}{
		{name: "wrong iss", claims: func(c map[string]any) { c["iss"] = "https://evil.example" }},
		{name: "iss with a trailing slash", claims: func(c map[string]any) { c["iss"] = c["iss"].(string) + "/" }},
		{name: "no iss", claims: func(c map[string]any) { delete(c, "iss") }},
		{name: "wrong aud", claims: func(c map[string]any) { c["aud"] = "other-client" }},
		{name: "no aud", claims: func(c map[string]any) { delete(c, "aud") }},
		{name: "aud not a string", claims: func(c map[string]any) { c["aud"] = []any{testClientID, 7} }},
		{name: "aud list holding us", claims: func(c map[string]any) { c["aud"] = []string{testClientID} }, ok: true},
		{name: "several aud without azp", claims: func(c map[string]any) { c["aud"] = []string{testClientID, "other"} }},
		{name: "several aud, azp us", claims: func(c map[string]any) { c["aud"] = []string{"other", testClientID}; c["azp"] = testClientID }, ok: true},
		{name: "several aud, azp another", claims: func(c map[string]any) { c["aud"] = []string{testClientID, "other"}; c["azp"] = "other" }},
		{name: "one aud, azp another", claims: func(c map[string]any) { c["azp"] = "other" }},
		{name: "azp not a string", claims: func(c map[string]any) { c["azp"] = 1 }},
		{name: "expired", claims: func(c map[string]any) { c["exp"] = t0.Add(-time.Second).Unix() }},
		{name: "expires now", claims: func(c map[string]any) { c["exp"] = t0.Unix() }},
		{name: "no exp", claims: func(c map[string]any) { delete(c, "exp") }},
		{name: "exp a string", claims: func(c map[string]any) { c["exp"] = "tomorrow" }},
		{name: "exp fractional", claims: func(c map[string]any) { c["exp"] = float64(t0.Unix()) + 60.5 }, ok: true},
		{name: "iat in the future", claims: func(c map[string]any) { c["iat"] = t0.Add(3 * time.Minute).Unix() }},
		{name: "iat within the skew", claims: func(c map[string]any) { c["iat"] = t0.Add(time.Minute).Unix() }, ok: true},
		{name: "iat absurdly old", claims: func(c map[string]any) { c["iat"] = t0.Add(-time.Hour).Unix() }},
		{name: "no iat", claims: func(c map[string]any) { delete(c, "iat") }},
		{name: "nbf ahead", claims: func(c map[string]any) { c["nbf"] = t0.Add(10 * time.Minute).Unix() }},
		{name: "nbf now", claims: func(c map[string]any) { c["nbf"] = t0.Unix() }, ok: true},
		{name: "bad nonce", claims: func(c map[string]any) { c["nonce"] = "another-request" }},
		{name: "no nonce", claims: func(c map[string]any) { delete(c, "nonce") }},
		{name: "no sub", claims: func(c map[string]any) { delete(c, "sub") }},
		{name: "sub too long", claims: func(c map[string]any) { c["sub"] = strings.Repeat("s", 256) }},
		{name: "sub not a string", claims: func(c map[string]any) { c["sub"] = 42 }},
		{name: "sid not a string", claims: func(c map[string]any) { c["sid"] = []any{} }},
		{name: "auth_time kept", claims: func(c map[string]any) { c["auth_time"] = t0.Add(-time.Minute).Unix() }, ok: true},
		{name: "auth_time garbage", claims: func(c map[string]any) { c["auth_time"] = "now" }},
		{name: "typ logout+jwt", header: map[string]any{"typ": "logout+jwt"}},
		{name: "typ JWT", header: map[string]any{"typ": "JWT"}, ok: true},
		{name: "alg none", raw: func(t *testing.T, claims map[string]any) string { return unsigned(claims) }},
		{name: "HS256 keyed by the client secret", signer: func(t *testing.T) signer {
			return newSigner(t, []byte(testClientSecret), "k1", jwa.HS256, false)
		}},
		{name: "RS384", signer: func(t *testing.T) signer { return newSigner(t, r1, "k1", jwa.RS384, false) }},
		{name: "PS256 under a key published for RS256", signer: func(t *testing.T) signer { return newSigner(t, r1, "k1", jwa.PS256, false) }},
		{name: "signed by a key not in the JWKS, under its kid", signer: func(t *testing.T) signer { return newSigner(t, r2, "k1", jwa.RS256, false) }},
		{name: "signed by a key not in the JWKS, under a new kid", signer: func(t *testing.T) signer { return newSigner(t, r2, "k-evil", jwa.RS256, false) }},
		{name: "crit header", header: map[string]any{"crit": []string{"exp"}}},
		{name: "jwk header naming the attacker's key", signer: func(t *testing.T) signer { return newSigner(t, r2, "", jwa.RS256, false) },
			header: map[string]any{"jwk": mustPublic(t, r2)}},
		{name: "payload not JSON", raw: func(t *testing.T, claims map[string]any) string {
			return resignRaw(t, []byte("not json"))
		}},
		{name: "encrypted", raw: func(t *testing.T, claims map[string]any) string { return "a.b.c.d.e" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			op.set(func(op *fakeOP) {
				op.claims, op.header = tc.claims, tc.header
				if tc.signer != nil {
					op.signer = tc.signer(t)
				}
				if tc.raw != nil {
					op.tokenHandler = func(w http.ResponseWriter, r *http.Request) {
						op.mu.Lock()
						claims := op.idClaims()
						op.mu.Unlock()
						w.Header().Set("Content-Type", "application/json")
						w.Write([]byte(`{"token_type":"Bearer","access_token":"a","id_token":"` + tc.raw(t, claims) + `"}`))
					}
				}
			})
			_, err := signIn(t, newTestClient(clock, Options{}), op, "")
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantKind(t, err, ErrInvalid)
		})
	}
}

func mustPublic(t *testing.T, raw any) jwk.Key {
	k, err := jwk.FromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := jwk.PublicKeyOf(k)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// resignRaw signs payload bytes (not necessarily JSON) with the fake's
// default key.
func resignRaw(t testing.TB, payload []byte) string {
	r1, _, _ := testKeys(t)
	return signBytes(t, newSigner(t, r1, "k1", jwa.RS256, true), payload, nil)
}

func TestKeyRotation(t *testing.T) {
	_, r2, _ := testKeys(t)
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
	if n := op.hitsOf("/jwks"); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}

	// The upstream rotates to k2; the cached set (fresh for an hour) lacks
	// it, and is older than the refetch floor: fetched once more, found.
	clock.Add(refetchFloor + time.Second)
	k2 := newSigner(t, r2, "k2", jwa.RS256, true)
	op.set(func(op *fakeOP) { op.signer = k2; op.keys = append(op.keys, k2.public(t)) })
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if n := op.hitsOf("/jwks"); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}

	// A kid nobody has, twice within the floor: one refetch at most.
	clock.Add(refetchFloor + time.Second)
	evil := newSigner(t, r2, "k-unknown", jwa.RS256, true)
	op.set(func(op *fakeOP) { op.signer = evil })
	for i := range 3 {
		_, err := signIn(t, c, op, "")
		wantKind(t, err, ErrInvalid)
		clock.Add(5 * time.Second)
		if n := op.hitsOf("/jwks"); n != 3 {
			t.Fatalf("attempt %d: JWKS fetched %d times, want 3", i, n)
		}
	}
	// After the floor, once more.
	clock.Add(refetchFloor)
	_, err := signIn(t, c, op, "")
	wantKind(t, err, ErrInvalid)
	if n := op.hitsOf("/jwks"); n != 4 {
		t.Fatalf("after the floor: JWKS fetched %d times, want 4", n)
	}
}

func TestUnknownKidWhileJWKSDown(t *testing.T) {
	_, r2, _ := testKeys(t)
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
	clock.Add(refetchFloor + time.Second)
	k2 := newSigner(t, r2, "k2", jwa.RS256, true)
	op.set(func(op *fakeOP) { op.signer = k2; op.keyStatus = http.StatusServiceUnavailable })
	_, err := signIn(t, c, op, "")
	wantKind(t, err, ErrUnreachable) // the key may exist: we could not look
	// The cached set still serves tokens of its own keys.
	op.set(func(op *fakeOP) { op.signer = newSigner(t, rsaPriv, "k1", jwa.RS256, true) })
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
}

func TestJWKSFiltering(t *testing.T) {
	r1, _, ec := testKeys(t)
	hmac := newSigner(t, []byte(testClientSecret), "oct", jwa.HS256, true)
	small := newSigner(t, rsaSmall, "small", jwa.RS256, true)
	rs := newSigner(t, r1, "k1", jwa.RS256, true)
	encKey := newSigner(t, ec, "enc", jwa.ES256, false)
	_ = encKey.key.Set(jwk.KeyUsageKey, "enc")
	for _, tc := range []struct {
		name   string
		keys   []jwk.Key
		signer signer
		ok     bool
	}{
		{"an HS256 key in the JWKS is never used", []jwk.Key{hmac.key, rs.public(t)}, hmac, false},
		{"a short RSA key is skipped", []jwk.Key{small.public(t), rs.public(t)}, small, false},
		{"an encryption key is skipped", []jwk.Key{encKey.public(t), rs.public(t)}, newSigner(t, ec, "enc", jwa.ES256, false), false},
		{"other keys do not spoil the set", []jwk.Key{hmac.key, small.public(t), encKey.public(t), rs.public(t)}, rs, true},
		{"a set of unusable keys is invalid", []jwk.Key{hmac.key, small.public(t)}, rs, false},
		{"no kid with several keys", []jwk.Key{rs.public(t), newSigner(t, ec, "es", jwa.ES256, false).public(t), newSigner(t, rsaPriv2, "k3", jwa.RS256, true).public(t)}, newSigner(t, r1, "", jwa.RS256, false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			op.set(func(op *fakeOP) { op.keys, op.signer = tc.keys, tc.signer })
			_, err := signIn(t, newTestClient(clock, Options{}), op, "")
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantKind(t, err, ErrInvalid)
		})
	}
}

func TestIssParameter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		supported bool
		iss       func(op *fakeOP) string
		ok        bool
	}{
		{"absent, not announced", false, func(*fakeOP) string { return "" }, true},
		{"present and equal", false, func(op *fakeOP) string { return op.issuer }, true},
		{"present and equal, announced", true, func(op *fakeOP) string { return op.issuer }, true},
		{"mismatched", false, func(*fakeOP) string { return "https://other.example" }, false},
		{"mismatched by a slash", true, func(op *fakeOP) string { return op.issuer + "/" }, false},
		{"missing when announced", true, func(*fakeOP) string { return "" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			op.set(func(op *fakeOP) { op.doc["authorization_response_iss_parameter_supported"] = tc.supported })
			_, err := signIn(t, newTestClient(clock, Options{}), op, tc.iss(op))
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantKind(t, err, ErrInvalid)
			if op.hitsOf("/token") != 0 {
				t.Error("the code went to the token endpoint before iss was checked")
			}
		})
	}
}

func TestStateChecked(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	ar := NewAuthRequest()
	_, err := c.Exchange(context.Background(), op.upstream(), testRedirect, ar, Callback{Code: "c", State: NewAuthRequest().State})
	wantKind(t, err, ErrInvalid)
	_, err = c.Exchange(context.Background(), op.upstream(), testRedirect, AuthRequest{State: "s", Nonce: "n", Verifier: "v"}, Callback{Code: "c", State: "s"})
	wantKind(t, err, ErrConfig)
	if op.hitsOf("/token") != 0 {
		t.Error("the token endpoint was called")
	}
}

func TestDiscoveryChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(doc map[string]any)
		kind   error // nil: accepted
	}{
		{"issuer mismatch", func(d map[string]any) { d["issuer"] = "https://other.example" }, ErrInvalid},
		{"issuer with a trailing slash", func(d map[string]any) { d["issuer"] = d["issuer"].(string) + "/" }, ErrInvalid},
		{"no authorization_endpoint", func(d map[string]any) { delete(d, "authorization_endpoint") }, ErrInvalid},
		{"no token_endpoint", func(d map[string]any) { delete(d, "token_endpoint") }, ErrInvalid},
		{"no jwks_uri", func(d map[string]any) { delete(d, "jwks_uri") }, ErrInvalid},
		{"token_endpoint a number", func(d map[string]any) { d["token_endpoint"] = 7 }, ErrInvalid},
		{"token_endpoint http at a non-loopback host", func(d map[string]any) { d["token_endpoint"] = "http://idp.example/token" }, ErrInvalid},
		{"jwks_uri http at 10.0.0.1", func(d map[string]any) { d["jwks_uri"] = "http://10.0.0.1/jwks" }, ErrInvalid},
		{"end_session_endpoint http elsewhere", func(d map[string]any) { d["end_session_endpoint"] = "http://idp.example/logout" }, ErrInvalid},
		{"endpoint with a fragment", func(d map[string]any) { d["authorization_endpoint"] = "https://idp.example/a#x" }, ErrInvalid},
		{"endpoint relative", func(d map[string]any) { d["authorization_endpoint"] = "/authorize" }, ErrInvalid},
		{"endpoints https elsewhere", func(d map[string]any) { d["authorization_endpoint"] = "https://login.example/authorize" }, nil},
		{"no code response type", func(d map[string]any) { d["response_types_supported"] = []string{"id_token"} }, ErrInvalid},
		{"no response types", func(d map[string]any) { delete(d, "response_types_supported") }, ErrInvalid},
		{"no S256", func(d map[string]any) { d["code_challenge_methods_supported"] = []string{"plain"} }, ErrInvalid},
		{"no code_challenge_methods_supported", func(d map[string]any) { delete(d, "code_challenge_methods_supported") }, nil},
		{"only HS256", func(d map[string]any) { d["id_token_signing_alg_values_supported"] = []string{"HS256", "none"} }, ErrInvalid},
		{"no algorithms", func(d map[string]any) { delete(d, "id_token_signing_alg_values_supported") }, ErrInvalid},
		{"RS256 among others", func(d map[string]any) { d["id_token_signing_alg_values_supported"] = []string{"HS256", "RS256"} }, nil},
		{"an odd advisory boolean", func(d map[string]any) { d["backchannel_logout_supported"] = "yes" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			op.set(func(op *fakeOP) { tc.change(op.doc) })
			m, err := newTestClient(clock, Options{}).Discover(context.Background(), op.issuer)
			if tc.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				if m.Issuer != op.issuer {
					t.Errorf("issuer %q", m.Issuer)
				}
				return
			}
			wantKind(t, err, tc.kind)
		})
	}
}

func TestDiscoveryAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		kind   error
	}{
		{"not JSON", 200, "<html>", ErrInvalid},
		{"a JSON array", 200, "[]", ErrInvalid},
		{"404", 404, "{}", ErrInvalid},
		{"500", 500, "{}", ErrUnreachable},
		{"503", 503, "", ErrUnreachable},
		{"429", 429, "", ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			op.set(func(op *fakeOP) { op.docStatus, op.docBody = tc.status, []byte(tc.body) })
			_, err := newTestClient(clock, Options{}).Discover(context.Background(), op.issuer)
			wantKind(t, err, tc.kind)
		})
	}
}

func TestIssuerConfig(t *testing.T) {
	for _, tc := range []struct {
		issuer string
		ok     bool
	}{
		{"https://idp.example", true},
		{"https://idp.example/tenant/v2.0", true},
		{"http://127.0.0.1:8080", true},
		{"http://[::1]:8080", true},
		{"http://localhost:8080/realms/x", true},
		{"http://idp.example", false},
		{"http://127.0.0.2", false},
		{"http://10.0.0.1", false},
		{"https://idp.example?x=1", false},
		{"https://idp.example#f", false},
		{"https://user@idp.example", false},
		{"ftp://idp.example", false},
		{"idp.example", false},
		{"", false},
	} {
		up := Upstream{Issuer: tc.issuer, ClientID: "c"}
		err := up.Validate()
		if tc.ok != (err == nil) {
			t.Errorf("%q: %v", tc.issuer, err)
		}
		if !tc.ok {
			wantKind(t, err, ErrConfig)
			_, err := NewClient(Options{}).Discover(context.Background(), tc.issuer)
			wantKind(t, err, ErrConfig)
		}
	}
	if err := (Upstream{Issuer: "https://idp.example"}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("no client id: %v", err)
	}
	if err := (Upstream{Issuer: "https://idp.example", ClientID: "c", Scopes: []string{"openid email"}}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("a scope with a space: %v", err)
	}
}

func TestHTTPSUpstream(t *testing.T) {
	// An https issuer: endpoints must be https, even at loopback.
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	tlsSrv := httptest.NewTLSServer(op.srv.Config.Handler)
	t.Cleanup(tlsSrv.Close)
	op.set(func(op *fakeOP) {
		op.issuer = tlsSrv.URL
		for _, k := range []string{"authorization_endpoint", "token_endpoint", "jwks_uri", "end_session_endpoint"} {
			op.doc[k] = strings.Replace(op.doc[k].(string), op.srv.URL, tlsSrv.URL, 1)
		}
		op.doc["issuer"] = tlsSrv.URL
	})
	c := newTestClient(clock, Options{HTTP: tlsSrv.Client()})
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
	op.set(func(op *fakeOP) { op.doc["jwks_uri"] = op.srv.URL + "/jwks" }) // http at loopback
	clock.Add(2 * time.Hour)
	_, err := c.Discover(context.Background(), tlsSrv.URL)
	if err != nil {
		t.Fatalf("the stale copy is not served: %v", err) // refresh failed: the cached document holds
	}
	clock.Add(maxStale)
	_, err = c.Discover(context.Background(), tlsSrv.URL)
	wantKind(t, err, ErrInvalid)
}

func TestCaching(t *testing.T) {
	for _, tc := range []struct {
		header string
		fresh  time.Duration
	}{
		{"", cacheDefault},
		{"max-age=120", 120 * time.Second},
		{"public, max-age=7200, must-revalidate", 2 * time.Hour},
		{"max-age=5", cacheFloor},
		{"no-store", cacheFloor},
		{"no-cache, max-age=3600", cacheFloor},
		{"max-age=999999999", cacheCeiling},
		{"max-age=bogus", cacheDefault},
	} {
		t.Run(tc.header, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			op.set(func(op *fakeOP) { op.docCache, op.keyCache = tc.header, tc.header })
			c := newTestClient(clock, Options{})
			if _, err := signIn(t, c, op, ""); err != nil {
				t.Fatal(err)
			}
			clock.Add(tc.fresh - time.Second)
			if _, err := signIn(t, c, op, ""); err != nil {
				t.Fatal(err)
			}
			if d, k := op.hitsOf("/.well-known/openid-configuration"), op.hitsOf("/jwks"); d != 1 || k != 1 {
				t.Fatalf("within freshness: discovery %d, JWKS %d fetches, want 1 each", d, k)
			}
			clock.Add(2 * time.Second)
			if _, err := signIn(t, c, op, ""); err != nil {
				t.Fatal(err)
			}
			if d, k := op.hitsOf("/.well-known/openid-configuration"), op.hitsOf("/jwks"); d != 2 || k != 2 {
				t.Fatalf("after freshness: discovery %d, JWKS %d fetches, want 2 each", d, k)
			}
		})
	}
}

func TestStaleOnFailure(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
	op.set(func(op *fakeOP) { op.docStatus, op.keyStatus = 503, 503 })
	clock.Add(cacheDefault + time.Minute)
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatalf("with the upstream's documents failing, the cached copies should serve: %v", err)
	}
	d := op.hitsOf("/.well-known/openid-configuration")
	if d != 2 {
		t.Fatalf("discovery fetched %d times, want 2", d)
	}
	// Within the backoff nobody asks again.
	clock.Add(failureBackoff / 2)
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
	if n := op.hitsOf("/.well-known/openid-configuration"); n != d {
		t.Fatalf("discovery fetched again within the backoff: %d", n)
	}
	clock.Add(failureBackoff)
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
	if n := op.hitsOf("/.well-known/openid-configuration"); n != d+1 {
		t.Fatalf("after the backoff: %d fetches, want %d", n, d+1)
	}
	// Past maxStale the failure shows.
	clock.Add(maxStale)
	_, err := signIn(t, c, op, "")
	wantKind(t, err, ErrUnreachable)
	// And the upstream back: all is well.
	op.set(func(op *fakeOP) { op.docStatus, op.keyStatus = 0, 0 })
	clock.Add(failureBackoff)
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentDiscoveryFetchesOnce(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	op.set(func(op *fakeOP) { op.delay = 50 * time.Millisecond })
	c := newTestClient(clock, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := c.Discover(context.Background(), op.issuer)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := op.hitsOf("/.well-known/openid-configuration"); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

func TestSlowUpstream(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	op.set(func(op *fakeOP) { op.delay = 5 * time.Second })
	c := newTestClient(clock, Options{Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := c.Discover(context.Background(), op.issuer)
	wantKind(t, err, ErrUnreachable)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a timeout should be context.DeadlineExceeded (for a 504): %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v", el)
	}

	// A slow token endpoint, the documents cached.
	op.set(func(op *fakeOP) { op.delay = 0 })
	clock.Add(failureBackoff)
	if _, err := signIn(t, c, op, ""); err != nil {
		t.Fatal(err)
	}
	op.set(func(op *fakeOP) {
		op.tokenHandler = func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		}
	})
	_, err = signIn(t, c, op, "")
	wantKind(t, err, ErrUnreachable)
}

func TestHugeAnswers(t *testing.T) {
	huge := func(withLength bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			const n = 5 << 20
			if withLength {
				w.Header().Set("Content-Length", "5242880")
			}
			w.Write([]byte(`{"x":"`))
			chunk := []byte(strings.Repeat("a", 64<<10))
			for written := 0; written < n; written += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}
	}
	for _, tc := range []struct {
		name       string
		withLength bool
		at         string
	}{
		{"discovery, streamed", false, "doc"},
		{"discovery, with Content-Length", true, "doc"},
		{"JWKS", false, "jwks"},
		{"token endpoint", true, "token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			srv := httptest.NewServer(huge(tc.withLength))
			t.Cleanup(srv.Close)
			if tc.at == "doc" {
				// The whole upstream is the huge one.
				_, err := newTestClient(clock, Options{}).Discover(context.Background(), srv.URL)
				wantKind(t, err, ErrInvalid)
				if !strings.Contains(err.Error(), "larger than") {
					t.Errorf("refused, but not for its size: %v", err)
				}
				return
			}
			if tc.at == "jwks" {
				op.set(func(op *fakeOP) { op.doc["jwks_uri"] = srv.URL })
			} else {
				op.set(func(op *fakeOP) { op.tokenHandler = huge(tc.withLength) })
			}
			_, err := signIn(t, newTestClient(clock, Options{}), op, "")
			wantKind(t, err, ErrInvalid)
			if !strings.Contains(err.Error(), "larger than") {
				t.Errorf("refused, but not for its size: %v", err)
			}
		})
	}
}

func TestMaxBody(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	body, _ := json.Marshal(op.doc)
	op.set(func(op *fakeOP) { op.docBody = body })
	for _, tc := range []struct {
		max int64
		ok  bool
	}{{int64(len(body)), true}, {int64(len(body)) - 1, false}} {
		_, err := newTestClient(clock, Options{MaxBody: tc.max}).Discover(context.Background(), op.issuer)
		if tc.ok {
			if err != nil {
				t.Fatalf("MaxBody %d, a document of %d bytes: %v", tc.max, len(body), err)
			}
			continue
		}
		wantKind(t, err, ErrInvalid)
		if !strings.Contains(err.Error(), "larger than") {
			t.Errorf("refused, but not for its size: %v", err)
		}
	}
}

func TestTokenEndpointAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		kind   error
		code   string
	}{
		{"invalid_grant", 400, `{"error":"invalid_grant","error_description":"code already used"}`, ErrUpstream, "invalid_grant"},
		{"invalid_client", 401, `{"error":"invalid_client"}`, ErrUpstream, "invalid_client"},
		{"an error at 200", 200, `{"error":"server_error"}`, ErrUpstream, "server_error"},
		{"500 with an OAuth error", 500, `{"error":"server_error"}`, ErrUnreachable, ""},
		{"503", 503, `busy`, ErrUnreachable, ""},
		{"400 not JSON", 400, `<html>bad</html>`, ErrInvalid, ""},
		{"403 JSON without error", 403, `{}`, ErrInvalid, ""},
		{"no id_token", 200, `{"access_token":"a","token_type":"Bearer"}`, ErrInvalid, ""},
		{"id_token not a string", 200, `{"id_token":5}`, ErrInvalid, ""},
		{"not JSON", 200, `id_token=x`, ErrInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(t0)
			op := newFakeOP(t, clock)
			op.set(func(op *fakeOP) {
				op.tokenHandler = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					w.Write([]byte(tc.body))
				}
			})
			_, err := signIn(t, newTestClient(clock, Options{}), op, "")
			wantKind(t, err, tc.kind)
			if tc.code != "" {
				var ue *UpstreamError
				if !errors.As(err, &ue) || ue.Code != tc.code || (tc.status != 200 && ue.Status != tc.status) {
					t.Fatalf("error %v: UpstreamError %+v", err, ue)
				}
			}
		})
	}
}

func TestUpstreamErrorBounded(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	long := strings.Repeat("x", 5000)
	op.set(func(op *fakeOP) {
		op.tokenHandler = func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			w.Write([]byte(`{"error":"` + long + `","error_description":"line one\nforged line ` + long + `"}`))
		}
	})
	_, err := signIn(t, newTestClient(clock, Options{}), op, "")
	var ue *UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("%v", err)
	}
	if len(ue.Code) > maxErrorCode || len(ue.Description) > maxErrorDescription || strings.Contains(ue.Description, "\n") {
		t.Errorf("code %d bytes, description %d bytes %q", len(ue.Code), len(ue.Description), ue.Description[:40])
	}
}

func TestRedirects(t *testing.T) {
	clock := testclock.New(t0)
	other := newFakeOP(t, clock)
	op := newFakeOP(t, clock)
	// The token endpoint redirects to another server: not followed.
	op.set(func(op *fakeOP) {
		op.tokenHandler = func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.issuer+"/token", http.StatusTemporaryRedirect)
		}
	})
	_, err := signIn(t, newTestClient(clock, Options{}), op, "")
	wantKind(t, err, ErrInvalid)
	if other.hitsOf("/token") != 0 {
		t.Error("the code and secret followed the redirect")
	}

	// The JWKS redirects on its own host: followed; to another: refused.
	op2 := newFakeOP(t, clock)
	op2.set(func(op *fakeOP) {
		op.extra = map[string]http.HandlerFunc{
			"/moved": func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/jwks", http.StatusFound) },
			"/away": func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.issuer+"/jwks", http.StatusFound)
			},
		}
	})
	op2.set(func(op *fakeOP) { op.doc["jwks_uri"] = op.issuer + "/moved" })
	if _, err := signIn(t, newTestClient(clock, Options{}), op2, ""); err != nil {
		t.Fatalf("same-host redirect: %v", err)
	}
	op2.set(func(op *fakeOP) { op.doc["jwks_uri"] = op.issuer + "/away" })
	_, err = signIn(t, newTestClient(clock, Options{}), op2, "")
	wantKind(t, err, ErrInvalid)
	if other.hitsOf("/jwks") != 0 {
		t.Error("the JWKS request followed a redirect to another host")
	}
}

func TestLogoutToken(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	base := func() map[string]any {
		return map[string]any{
			"iss":    op.issuer,
			"aud":    testClientID,
			"iat":    t0.Unix(),
			"jti":    "jti-1",
			"sid":    "upstream-session-1",
			"sub":    "alice-at-upstream",
			"events": map[string]any{backchannelLogoutEvent: map[string]any{}},
		}
	}
	for _, tc := range []struct {
		name   string
		claims func(c map[string]any)
		header map[string]any
		ok     bool
	}{
		{name: "valid", ok: true},
		{name: "valid, typ logout+jwt", header: map[string]any{"typ": "logout+jwt"}, ok: true},
		{name: "valid, typ application/logout+jwt", header: map[string]any{"typ": "application/logout+jwt"}, ok: true},
		{name: "only sid", claims: func(c map[string]any) { delete(c, "sub") }, ok: true},
		{name: "only sub", claims: func(c map[string]any) { delete(c, "sid") }, ok: true},
		{name: "with exp ahead", claims: func(c map[string]any) { c["exp"] = t0.Add(2 * time.Minute).Unix() }, ok: true},
		{name: "with a nonce", claims: func(c map[string]any) { c["nonce"] = "n" }},
		{name: "without events", claims: func(c map[string]any) { delete(c, "events") }},
		{name: "events without the logout event", claims: func(c map[string]any) { c["events"] = map[string]any{"other": map[string]any{}} }},
		{name: "the event not an object", claims: func(c map[string]any) { c["events"] = map[string]any{backchannelLogoutEvent: true} }},
		{name: "without jti", claims: func(c map[string]any) { delete(c, "jti") }},
		{name: "jti not a string", claims: func(c map[string]any) { c["jti"] = 1 }},
		{name: "without sid and sub", claims: func(c map[string]any) { delete(c, "sid"); delete(c, "sub") }},
		{name: "empty sid and sub", claims: func(c map[string]any) { c["sid"], c["sub"] = "", "" }},
		{name: "wrong aud", claims: func(c map[string]any) { c["aud"] = "other" }},
		{name: "wrong iss", claims: func(c map[string]any) { c["iss"] = "https://other.example" }},
		{name: "wrong typ", header: map[string]any{"typ": "JWT"}},
		{name: "without iat", claims: func(c map[string]any) { delete(c, "iat") }},
		{name: "iat old", claims: func(c map[string]any) { c["iat"] = t0.Add(-time.Hour).Unix() }},
		{name: "iat ahead", claims: func(c map[string]any) { c["iat"] = t0.Add(time.Hour).Unix() }},
		{name: "expired", claims: func(c map[string]any) { c["exp"] = t0.Add(-time.Second).Unix() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims := base()
			if tc.claims != nil {
				tc.claims(claims)
			}
			lt, err := c.VerifyLogoutToken(context.Background(), op.upstream(), sign(t, op.signer, claims, tc.header))
			if !tc.ok {
				wantKind(t, err, ErrInvalid)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lt.JTI != "jti-1" || lt.SID != claims["sid"] && claims["sid"] != nil || !lt.IssuedAt.Equal(t0) {
				t.Errorf("%+v", lt)
			}
			want := t0.Add(maxTokenAge)
			if _, ok := claims["exp"]; ok {
				want = t0.Add(2 * time.Minute)
			}
			if !lt.ReplayUntil.Equal(want) {
				t.Errorf("ReplayUntil %v, want %v", lt.ReplayUntil, want)
			}
		})
	}

	// An ID token is no logout token.
	tok, err := signIn(t, c, op, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.VerifyLogoutToken(context.Background(), op.upstream(), tok.Raw)
	wantKind(t, err, ErrInvalid)
	// Nor garbage.
	_, err = c.VerifyLogoutToken(context.Background(), op.upstream(), "not-a-token")
	wantKind(t, err, ErrInvalid)
}

func TestAuthorizeURL(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	op.set(func(op *fakeOP) { op.doc["authorization_endpoint"] = op.issuer + "/authorize?p=b2c_policy" })
	c := newTestClient(clock, Options{})
	ar := NewAuthRequest()
	zero := 0
	raw, err := c.AuthorizeURL(context.Background(), op.upstream(), testRedirect, ar, AuthorizeOptions{Prompt: "login", MaxAge: &zero, LoginHint: "alice@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(ar.Verifier))
	want := map[string]string{
		"p":                     "b2c_policy",
		"response_type":         "code",
		"client_id":             testClientID,
		"redirect_uri":          testRedirect,
		"scope":                 "openid email profile",
		"state":                 ar.State,
		"nonce":                 ar.Nonce,
		"code_challenge":        base64.RawURLEncoding.EncodeToString(sum[:]),
		"code_challenge_method": "S256",
		"prompt":                "login",
		"max_age":               "0",
		"login_hint":            "alice@example.com",
	}
	q := u.Query()
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if len(q) != len(want) {
		t.Errorf("query %v", q)
	}
	if u.Scheme+"://"+u.Host+u.Path != op.issuer+"/authorize" {
		t.Errorf("endpoint %s", raw)
	}

	// Scopes without openid get it; nothing optional is sent unasked.
	up := op.upstream()
	up.Scopes = []string{"email", "groups"}
	raw, err = c.AuthorizeURL(context.Background(), up, testRedirect, ar, AuthorizeOptions{LoginHint: "bad\nhint"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ = url.Parse(raw)
	if q := u.Query(); q.Get("scope") != "openid email groups" || q.Has("prompt") || q.Has("max_age") || q.Has("login_hint") {
		t.Errorf("query %v", q)
	}

	for _, bad := range []AuthorizeOptions{{Prompt: "login please"}, {Prompt: "none login"}, {MaxAge: new(-1)}} {
		_, err := c.AuthorizeURL(context.Background(), op.upstream(), testRedirect, ar, bad)
		wantKind(t, err, ErrConfig)
	}
	_, err = c.AuthorizeURL(context.Background(), op.upstream(), "/relative", ar, AuthorizeOptions{})
	wantKind(t, err, ErrConfig)
}

func TestNewAuthRequest(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		ar := NewAuthRequest()
		if err := ar.validate(); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{ar.State, ar.Nonce, ar.Verifier} {
			if len(v) != 43 || seen[v] {
				t.Fatalf("value %q: short or repeated", v)
			}
			seen[v] = true
		}
	}
	for _, ar := range []AuthRequest{{}, {State: "short", Nonce: strings.Repeat("n", 43), Verifier: strings.Repeat("v", 43)},
		{State: strings.Repeat("s", 43), Nonce: strings.Repeat("n", 43), Verifier: strings.Repeat("v", 30)},
		{State: strings.Repeat("s", 43), Nonce: strings.Repeat("n", 43), Verifier: strings.Repeat("v", 42) + "/"}} {
		if err := ar.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", ar, err)
		}
	}
}

func TestParseCallback(t *testing.T) {
	for _, tc := range []struct {
		query string
		kind  error
		want  Callback
	}{
		{"code=c&state=s&iss=https%3A%2F%2Fidp", nil, Callback{Code: "c", State: "s", Iss: "https://idp"}},
		{"code=c&state=s", nil, Callback{Code: "c", State: "s"}},
		{"error=access_denied&error_description=no&state=s", ErrUpstream, Callback{State: "s"}},
		{"state=s", ErrInvalid, Callback{State: "s"}},
		{"code=c&code=d&state=s", ErrInvalid, Callback{Code: "c", State: "s"}},
		{"code=c&state=s&state=t", ErrInvalid, Callback{Code: "c", State: "s"}},
	} {
		q, _ := url.ParseQuery(tc.query)
		cb, err := ParseCallback(q)
		if cb != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.query, cb, tc.want)
		}
		if tc.kind == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.query, err)
			}
			continue
		}
		wantKind(t, err, tc.kind)
	}
	q, _ := url.ParseQuery("error=access_denied&error_description=the+person+declined")
	_, err := ParseCallback(q)
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.Code != "access_denied" || ue.Description != "the person declined" || ue.Status != 0 {
		t.Errorf("%v: %+v", err, ue)
	}
}

func TestEndSessionURL(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	raw, ok, err := c.EndSessionURL(context.Background(), op.upstream(), "the.id.token", "https://oidcd.example/federation/up/logged-out", "st")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	u, _ := url.Parse(raw)
	q := u.Query()
	if u.Path != "/logout" || q.Get("id_token_hint") != "the.id.token" || q.Get("client_id") != testClientID ||
		q.Get("post_logout_redirect_uri") != "https://oidcd.example/federation/up/logged-out" || q.Get("state") != "st" {
		t.Errorf("%s", raw)
	}
	// Without a redirect, no state; without a hint, no hint.
	raw, _, _ = c.EndSessionURL(context.Background(), op.upstream(), "", "", "st")
	u, _ = url.Parse(raw)
	if q := u.Query(); q.Has("state") || q.Has("id_token_hint") || q.Get("client_id") != testClientID {
		t.Errorf("%s", raw)
	}

	op2 := newFakeOP(t, clock)
	op2.set(func(op *fakeOP) { delete(op.doc, "end_session_endpoint") })
	raw, ok, err = c.EndSessionURL(context.Background(), op2.upstream(), "h", "", "")
	if err != nil || ok || raw != "" {
		t.Errorf("no endpoint: %q %v %v", raw, ok, err)
	}
}

func TestStringsClaim(t *testing.T) {
	many := make([]any, 1500)
	for i := range many {
		many[i] = "g"
	}
	for _, tc := range []struct {
		value any
		want  int
	}{
		{"one", 1},
		{[]any{"a", "b"}, 2},
		{[]any{"a", 1, nil, "", strings.Repeat("x", 2000), "b"}, 2},
		{many, maxClaimStrings},
		{[]string{"a"}, 1},
		{"", 0},
		{42, 0},
		{map[string]any{"a": "b"}, 0},
		{nil, 0},
	} {
		if got := StringsClaim(map[string]any{"groups": tc.value}, "groups"); len(got) != tc.want {
			t.Errorf("%T: %d values, want %d", tc.value, len(got), tc.want)
		}
	}
	if StringsClaim(nil, "groups") != nil {
		t.Error("nil claims")
	}
}

func TestRedirectURI(t *testing.T) {
	for _, tc := range []struct{ issuer, slug, want string }{
		{"https://id.example", "entra", "https://id.example/federation/entra/callback"},
		{"https://id.example/", "entra", "https://id.example/federation/entra/callback"},
		{"https://example.com/id", "a b", "https://example.com/id/federation/a%20b/callback"},
	} {
		if got := RedirectURI(tc.issuer, tc.slug); got != tc.want {
			t.Errorf("%q %q: %q", tc.issuer, tc.slug, got)
		}
	}
}

func TestContextCancelled(t *testing.T) {
	clock := testclock.New(t0)
	op := newFakeOP(t, clock)
	c := newTestClient(clock, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Discover(ctx, op.issuer)
	wantKind(t, err, ErrUnreachable)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v", err)
	}
}
