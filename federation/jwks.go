package federation

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"slices"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

const (
	// minRSABits refuses RSA keys that are too short to trust (NIST
	// SP 800-131A; every provider publishes 2048 bits or more).
	minRSABits = 2048
	// maxKeys bounds the keys kept of one JWKS (real ones hold 2 to ~10).
	maxKeys = 100
)

// keySet is the usable keys of an upstream's JWKS.
type keySet struct {
	keys []verifyKey
}

// verifyKey is one public key and what it may verify.
type verifyKey struct {
	kid  string
	algs []string // of allowedAlgs, the ones this key may verify
	pub  crypto.PublicKey
}

// keys returns the upstream's key set, from the cache while fresh; with
// renew (a token named a kid the cached set lacks) it is fetched again
// unless it was fetched less than refetchFloor ago.
func (c *Client) keys(ctx context.Context, jwksURI string, renew bool) (*keySet, error) {
	return load(ctx, c, &c.jwks, jwksURI, renew, func(ctx context.Context) (*keySet, time.Duration, error) {
		a, err := c.getJSON(ctx, jwksURI)
		if err != nil {
			return nil, 0, err
		}
		ks, err := parseKeySet(a.body)
		if err != nil {
			return nil, 0, err
		}
		return ks, maxAge(a.header), nil
	})
}

// parseKeySet reads a JWKS (RFC 7517, 5) and keeps the keys that can
// verify one of allowedAlgs: RSA of minRSABits or more, EC on P-256; for
// signatures (use absent or "sig", key_ops absent or holding "verify");
// with an alg, if any, among allowedAlgs. Every other key is skipped, not
// refused: an upstream publishing an encryption key or an Ed25519 key
// beside its signing keys is still usable, and a symmetric or "none" key
// is never one a token can name. A set with no usable key is invalid.
func parseKeySet(body []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, withKind(ErrInvalid, err, "JWKS is not a JSON key set")
	}
	ks := &keySet{}
	for _, raw := range doc.Keys {
		if len(ks.keys) == maxKeys {
			break
		}
		if k, ok := parseKey(raw); ok {
			ks.keys = append(ks.keys, k)
		}
	}
	if len(ks.keys) == 0 {
		return nil, invalidf("JWKS holds no RSA (%d bits or more) or P-256 signing key", minRSABits)
	}
	return ks, nil
}

func parseKey(raw []byte) (verifyKey, bool) {
	k, err := jwk.ParseKey(raw)
	if err != nil {
		return verifyKey{}, false
	}
	if u := k.KeyUsage(); u != "" && u != string(jwk.ForSignature) {
		return verifyKey{}, false
	}
	if ops := k.KeyOps(); len(ops) > 0 && !slices.Contains(ops, jwk.KeyOpVerify) {
		return verifyKey{}, false
	}
	pk, err := jwk.PublicKeyOf(k) // a private key published by mistake: its public half
	if err != nil {
		return verifyKey{}, false
	}
	var raw0 any
	if err := pk.Raw(&raw0); err != nil {
		return verifyKey{}, false
	}
	vk := verifyKey{kid: k.KeyID()}
	switch pub := raw0.(type) {
	case *rsa.PublicKey:
		if pub.N == nil || pub.N.BitLen() < minRSABits {
			return verifyKey{}, false
		}
		vk.pub, vk.algs = pub, []string{"RS256", "PS256"}
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return verifyKey{}, false
		}
		vk.pub, vk.algs = pub, []string{"ES256"}
	default:
		return verifyKey{}, false
	}
	if a := k.Algorithm().String(); a != "" {
		if !slices.Contains(vk.algs, a) {
			return verifyKey{}, false
		}
		vk.algs = []string{a}
	}
	return vk, true
}

// find returns the keys that may verify a token signed with alg under
// kid (several only when the set repeats a kid). Without a kid it is the
// one key of the set for alg, when there is only one (OpenID Connect Core
// 1.0, 10.1: with several keys a kid is required).
func (ks *keySet) find(kid, alg string) []verifyKey {
	var found []verifyKey
	for _, k := range ks.keys {
		if (kid == "" || k.kid == kid) && slices.Contains(k.algs, alg) {
			found = append(found, k)
		}
	}
	if kid == "" && len(found) > 1 {
		return nil
	}
	return found
}
