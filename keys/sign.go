package keys

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// Sign returns a compact JWS (RS256) of claims made with the key active now.
// claims must encode to a JSON object: a map[string]any, a struct or a
// json.RawMessage. The protected header always carries kid,
// and typ when typ is not empty (TypJWT for ID and access tokens, TypLogout
// for logout tokens). It fails with ErrNoKey when no key is active.
func (m *Manager) Sign(claims any, typ string) ([]byte, error) {
	ks, err := m.current()
	if err != nil {
		return nil, err
	}
	i := activeAt(ks.entries, m.now())
	if i < 0 {
		return nil, ErrNoKey
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return nil, fmt.Errorf("keys: encode claims: %w", err)
	}
	if len(payload) == 0 || payload[0] != '{' {
		return nil, fmt.Errorf("keys: claims must encode to a JSON object, got %T", claims)
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.KeyIDKey, ks.entries[i].kid); err != nil {
		return nil, fmt.Errorf("keys: kid header: %w", err)
	}
	if typ != "" {
		if err := hdr.Set(jws.TypeKey, typ); err != nil {
			return nil, fmt.Errorf("keys: typ header: %w", err)
		}
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.RS256, ks.priv[i], jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return nil, fmt.Errorf("keys: sign: %w", err)
	}
	return tok, nil
}

// CanSign reports whether a key is active here now: the first signing key
// has been applied locally (readiness, node's /readyz).
func (m *Manager) CanSign() bool {
	ks, err := m.current()
	return err == nil && activeAt(ks.entries, m.now()) >= 0
}

// Verify checks that token is a compact JWS signed with RS256 by a key that
// is published now, chosen by the kid header, and returns its payload: the
// claims, a JSON object (jws checks the signature; the payload is decoded
// by the caller into the claims it needs). It rejects alg none, any other
// algorithm, unknown or unpublished kids and a payload that is not a JSON
// object, all wrapped in ErrInvalidToken. It does not validate exp, iat,
// iss or aud: callers decide (an expired id_token_hint is still ours).
func (m *Manager) Verify(token []byte) ([]byte, error) {
	t, _, err := m.VerifyKid(token)
	return t, err
}

// VerifyKid is Verify that also returns the kid of the key that verified
// the token. A kid is the thumbprint of its key, so for that token and
// kid, Published(kid) later tells whether Verify would still accept the
// signature: callers that cache verified tokens ask it on every hit.
func (m *Manager) VerifyKid(token []byte) ([]byte, string, error) {
	if len(token) > MaxTokenSize {
		return nil, "", fmt.Errorf("%w: larger than %d bytes", ErrInvalidToken, MaxTokenSize)
	}
	if !compactJWS(token) {
		return nil, "", fmt.Errorf("%w: not a compact JWS", ErrInvalidToken)
	}
	ks, err := m.current()
	if err != nil {
		return nil, "", err
	}
	now, retention := m.now(), m.cfg.Retention
	var kid string
	provider := jws.KeyProviderFunc(func(_ context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		h := sig.ProtectedHeaders()
		if h.Algorithm() != jwa.RS256 {
			return fmt.Errorf("alg %q not accepted", h.Algorithm())
		}
		i := ks.publishedKey(h.KeyID(), now, retention)
		if i < 0 {
			return fmt.Errorf("%w: kid %q", ErrUnknownKey, h.KeyID())
		}
		kid = h.KeyID()
		sink.Key(jwa.RS256, &ks.priv[i].PublicKey)
		return nil
	})
	payload, err := jws.Verify(token, jws.WithKeyProvider(provider))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if !jsonObject(payload) {
		return nil, "", fmt.Errorf("%w: claims are not a JSON object", ErrInvalidToken)
	}
	return payload, kid, nil
}

// Published reports whether kid names a key that is published now, which
// is what Verify requires of a token's kid. It is cheap: the cached key
// set and a scan of its few entries.
func (m *Manager) Published(kid string) (bool, error) {
	ks, err := m.current()
	if err != nil {
		return false, err
	}
	return ks.publishedKey(kid, m.now(), m.cfg.Retention) >= 0, nil
}

// JWKS returns the encoded key set of the keys published now:
// {"keys":[{alg,e,kid,kty,n,use}]}, public parts only. The bytes are shared
// and must not be modified; they are re-encoded only when the stored set
// changes or a retired key's retention ends. ErrNoKey when nothing is
// published.
func (m *Manager) JWKS() ([]byte, error) {
	enc, err := m.publishedNow()
	if err != nil {
		return nil, err
	}
	return enc.json, nil
}

// PublicSet returns the keys published now, for verifying our own tokens
// with jwx (including tokens of a retired key that is still published).
// The set is a fresh container; its keys are shared and must not be
// modified. ErrNoKey when nothing is published.
func (m *Manager) PublicSet() (jwk.Set, error) {
	enc, err := m.publishedNow()
	if err != nil {
		return nil, err
	}
	set, err := enc.set.Clone()
	if err != nil {
		return nil, fmt.Errorf("keys: clone key set: %w", err)
	}
	return set, nil
}

func (m *Manager) publishedNow() (*encoded, error) {
	ks, err := m.current()
	if err != nil {
		return nil, err
	}
	enc, err := ks.published(m.now(), m.cfg.Retention)
	if err != nil {
		return nil, err
	}
	if enc.empty {
		return nil, ErrNoKey
	}
	return enc, nil
}

// List describes the keys published now, in activation order (oldest
// first).
func (m *Manager) List() ([]Info, error) {
	ks, err := m.current()
	if err != nil {
		return nil, err
	}
	now := m.now()
	active := activeAt(ks.entries, now)
	out := make([]Info, 0, len(ks.entries))
	for i, e := range ks.entries {
		if e.publishedAt(now, m.cfg.Retention) {
			out = append(out, info(ks.entries, i, active, now))
		}
	}
	return out, nil
}

// strictB64URL decodes only canonical unpadded base64url.
var strictB64URL = base64.RawURLEncoding.Strict()

// compactJWS reports whether token has the shape of a compact JWS: three
// parts of canonical unpadded base64url separated by dots, and nothing
// else. jws.Parse is more lenient: it trims surrounding white space and
// ignores the unused low bits of a part's last character, so one token
// would have many spellings that all verify. (The decoder skips CR and
// LF even when strict: they are refused first.)
func compactJWS(token []byte) bool {
	parts := bytes.Split(token, []byte{'.'})
	if len(parts) != 3 || bytes.ContainsAny(token, "\r\n") {
		return false
	}
	buf := make([]byte, strictB64URL.DecodedLen(len(token)))
	for _, p := range parts {
		if _, err := strictB64URL.Decode(buf, p); err != nil {
			return false
		}
	}
	return true
}

// jsonObject reports whether b is one valid JSON object.
func jsonObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
