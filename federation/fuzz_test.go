package federation

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/oidcd/oidcd/internal/testkit/testclock"
)

// The token checks take what the network and the browser send; whatever
// that is, they answer an error or a token, never a panic. Under plain
// go test each target runs its seeds only; go test -fuzz runs it longer.

// fuzzSetup is an upstream, a client with its documents cached (the clock
// stands still, so an unknown kid refetches the JWKS at most once) and
// the pieces to build tokens.
func fuzzSetup(f *testing.F) (*fakeOP, *Client, Upstream, *Metadata) {
	clock := testclock.New(t0)
	op := newFakeOP(f, clock)
	c := newTestClient(clock, Options{})
	meta, err := c.Discover(context.Background(), op.issuer)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := c.keys(context.Background(), meta.JWKSURI, false); err != nil {
		f.Fatal(err)
	}
	return op, c, op.upstream(), meta
}

// FuzzVerifyRaw hands arbitrary strings to both token checks.
func FuzzVerifyRaw(f *testing.F) {
	op, c, up, meta := fuzzSetup(f)
	valid := sign(f, op.signer, map[string]any{"iss": op.issuer, "aud": testClientID, "sub": "s", "iat": t0.Unix(), "exp": t0.Unix() + 60, "nonce": "n"}, nil)
	for _, seed := range []string{
		"", ".", "..", "a.b.c", "a.b.c.d.e", valid, valid + "x", valid[:len(valid)-3],
		unsigned(map[string]any{"iss": op.issuer}),
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"k1","crit":["x"]}`)) + ".e30.c2ln",
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":7}`)) + ".e30.c2ln",
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"nope"}`)) + ".e30.c2ln",
		base64.RawURLEncoding.EncodeToString([]byte(`[]`)) + ".e30.c2ln",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if tok, err := c.verifyIDToken(context.Background(), up, meta, raw, "n"); (tok == nil) == (err == nil) {
			t.Fatalf("token %v, error %v", tok, err)
		}
		if lt, err := c.verifyLogoutToken(context.Background(), up, meta, raw); (lt == nil) == (err == nil) {
			t.Fatalf("logout token %v, error %v", lt, err)
		}
	})
}

// FuzzClaims signs arbitrary payloads with the upstream's key, so the
// claim checks behind the signature see every shape of JSON.
func FuzzClaims(f *testing.F) {
	op, c, up, meta := fuzzSetup(f)
	for _, seed := range []string{
		`{}`, `null`, `[]`, `"x"`, `1e999`, `{"iss":1}`,
		`{"iss":"` + op.issuer + `","aud":["` + testClientID + `",{}],"exp":1e308,"iat":-1}`,
		`{"iss":"` + op.issuer + `","aud":"` + testClientID + `","exp":1893553445.5,"iat":1893553445,"nonce":"n","sub":"s","email_verified":"true","amr":"pwd","auth_time":"x"}`,
		`{"iss":"` + op.issuer + `","aud":"` + testClientID + `","iat":1893553445,"jti":"j","sid":"s","events":{"http://schemas.openid.net/event/backchannel-logout":{}}}`,
		`{"iss":"` + op.issuer + `","aud":"` + testClientID + `","iat":1893553445,"jti":"j","sub":["s"],"events":[]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		raw := signBytes(t, op.signer, payload, nil)
		if tok, err := c.verifyIDToken(context.Background(), up, meta, raw, "n"); err == nil {
			_ = StringsClaim(tok.Claims, "groups")
		}
		_, _ = c.verifyLogoutToken(context.Background(), up, meta, raw)
		_, _ = parseKeySet(payload)
		_, _ = parseDiscovery(payload, op.issuer, true)
	})
}
