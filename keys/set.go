package keys

import (
	"cmp"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
)

// entry is one key's times, placed in activation order.
type entry struct {
	kid         string
	createdAt   time.Time
	activatesAt time.Time
	retiredAt   time.Time // ActivatesAt of the next key in order; zero for the last
}

// order sorts keys by activation (ActivatesAt, then kid, so that every node
// agrees even on equal times) and derives when each one is retired.
func order(keys []fsm.Key) []entry {
	out := make([]entry, len(keys))
	for i, k := range keys {
		out[i] = entry{kid: k.Kid, createdAt: k.CreatedAt, activatesAt: k.ActivatesAt}
	}
	slices.SortFunc(out, func(a, b entry) int {
		if c := a.activatesAt.Compare(b.activatesAt); c != 0 {
			return c
		}
		return cmp.Compare(a.kid, b.kid)
	})
	for i := 0; i+1 < len(out); i++ {
		out[i].retiredAt = out[i+1].activatesAt
	}
	return out
}

// activeAt is the index of the key that signs at t, or -1.
//
// Before the first key's activation the first key is active: it has no
// predecessor to sign instead, and a node whose clock runs behind the
// leader that made it (whose skew is not measured yet at a cluster's first
// start) must not be left without a key until its clock catches up.
func activeAt(es []entry, t time.Time) int {
	for i := len(es) - 1; i >= 0; i-- {
		if !es[i].activatesAt.After(t) {
			return i
		}
	}
	if len(es) > 0 {
		return 0
	}
	return -1
}

// publishedAt reports whether e is in the key set at t: it is not retired,
// or its retention has not ended.
func (e entry) publishedAt(t time.Time, retention time.Duration) bool {
	return e.retiredAt.IsZero() || t.Before(e.retiredAt.Add(retention))
}

// unpublishedAt is when e leaves the key set; zero if not scheduled.
func (e entry) unpublishedAt(retention time.Duration) time.Time {
	if e.retiredAt.IsZero() {
		return time.Time{}
	}
	return e.retiredAt.Add(retention)
}

// info describes es[i] at t, where active = activeAt(es, t).
func info(es []entry, i, active int, t time.Time) Info {
	e := es[i]
	in := Info{Kid: e.kid, CreatedAt: e.createdAt}
	at := e.activatesAt
	in.ActivatesAt = &at
	switch {
	case i == active:
		in.State = StateActive
	case e.activatesAt.After(t):
		in.State = StateNext
	default:
		in.State = StateRetired
		rt := e.retiredAt
		in.RetiredAt = &rt
	}
	return in
}

// keySet is one version of the stored keys, parsed. It is immutable except
// for the lazily encoded JWKS.
type keySet struct {
	version uint64
	entries []entry
	priv    []*rsa.PrivateKey // by entry index
	pub     []jwk.Key         // public JWK with kid, alg, use; by entry index

	enc atomic.Pointer[encoded]
}

// encoded is the published set for the interval [from, until) between two
// retention boundaries (zero from: since ever; zero until: for ever).
type encoded struct {
	from, until time.Time
	json        []byte
	set         jwk.Set
	empty       bool
}

func (e *encoded) covers(t time.Time) bool {
	return (e.from.IsZero() || !t.Before(e.from)) && (e.until.IsZero() || t.Before(e.until))
}

// snapshot is the cached keySet and what it was read at.
type snapshot struct {
	set     *keySet
	gen     uint64 // Manager.gen before the read
	applied uint64 // State.Applied() before the read
}

// current returns the key set, rereading the store only when it may have
// changed (see OnApply).
func (m *Manager) current() (*keySet, error) {
	if s := m.snap.Load(); s != nil && m.fresh(s) {
		return s.set, nil
	}
	return m.reload()
}

func (m *Manager) fresh(s *snapshot) bool {
	hooked := m.hooked.Load() // before gen: see OnApply
	if m.gen.Load() != s.gen {
		return false
	}
	return hooked || m.cfg.State.Applied() == s.applied
}

func (m *Manager) reload() (*keySet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.snap.Load()
	if prev != nil && m.fresh(prev) {
		return prev.set, nil
	}
	// Read the markers before the keys: a change racing with the read
	// moves them again and causes another reload.
	gen, applied := m.gen.Load(), m.cfg.State.Applied()
	stored, version, err := m.cfg.State.Keys()
	if err != nil {
		return nil, fmt.Errorf("keys: read key set: %w", err)
	}
	var set *keySet
	if prev != nil && sameKids(prev.set, version, stored) {
		set = prev.set
	} else {
		var old *keySet
		if prev != nil {
			old = prev.set
		}
		if set, err = build(stored, version, old, m.cfg.KEK); err != nil {
			return nil, err
		}
	}
	m.snap.Store(&snapshot{set: set, gen: gen, applied: applied})
	return set, nil
}

func sameKids(ks *keySet, version uint64, stored []fsm.Key) bool {
	if ks.version != version || len(ks.entries) != len(stored) {
		return false
	}
	for _, k := range stored {
		if !slices.ContainsFunc(ks.entries, func(e entry) bool { return e.kid == k.Kid }) {
			return false
		}
	}
	return true
}

// build parses stored keys, reusing the parsed keys of old (keys never
// change once written).
func build(stored []fsm.Key, version uint64, old *keySet, kk *kek.KEK) (*keySet, error) {
	byKid := make(map[string]fsm.Key, len(stored))
	for _, k := range stored {
		byKid[k.Kid] = k
	}
	ks := &keySet{version: version, entries: order(stored)}
	ks.priv = make([]*rsa.PrivateKey, len(ks.entries))
	ks.pub = make([]jwk.Key, len(ks.entries))
	for i, e := range ks.entries {
		if old != nil {
			if j := slices.IndexFunc(old.entries, func(o entry) bool { return o.kid == e.kid }); j >= 0 {
				ks.priv[i], ks.pub[i] = old.priv[j], old.pub[j]
				continue
			}
		}
		priv, pub, err := parse(byKid[e.kid], kk)
		if err != nil {
			return nil, err
		}
		ks.priv[i], ks.pub[i] = priv, pub
	}
	return ks, nil
}

// parse opens a stored key and decodes it into its RSA private key and
// public JWK.
func parse(k fsm.Key, kk *kek.KEK) (*rsa.PrivateKey, jwk.Key, error) {
	der, err := openPrivate(k, kk)
	if err != nil {
		return nil, nil, err
	}
	raw, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, nil, fmt.Errorf("keys: parse key %s: %w", k.Kid, err)
	}
	priv, ok := raw.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("keys: key %s is %T, want RSA", k.Kid, raw)
	}
	pub, err := publicJWK(priv, k.Kid)
	if err != nil {
		return nil, nil, err
	}
	return priv, pub, nil
}

// derSequence is the first byte of a bare PKCS#8 DER key (an ASN.1
// SEQUENCE), as keys were stored before they were sealed; no kek record
// begins with it.
const derSequence = 0x30

// openPrivate returns the PKCS#8 DER of a stored key, opening it with kk.
func openPrivate(k fsm.Key, kk *kek.KEK) ([]byte, error) {
	if len(k.Private) > 0 && k.Private[0] == derSequence {
		return k.Private, nil
	}
	der, err := kk.Open(k.Private, PrivateKeyAAD(k.Kid))
	if err != nil {
		return nil, fmt.Errorf("keys: open key %s: %w", k.Kid, err)
	}
	return der, nil
}

// CheckStored opens and parses every stored key with the configured KEK,
// so a node can refuse to start when it could not sign or verify (no
// --kek-file, or another one than the cluster's; the error wraps
// kek.ErrNoKEK or kek.ErrWrongKEK). It also reports how many stored keys
// are in the clear while a KEK is configured (written before the KEK was
// given; they stay so until rotated out).
func (m *Manager) CheckStored() (clear int, err error) {
	stored, _, err := m.cfg.State.Keys()
	if err != nil {
		return 0, fmt.Errorf("keys: read key set: %w", err)
	}
	for _, k := range stored {
		if _, _, err := parse(k, m.cfg.KEK); err != nil {
			return 0, err
		}
		if !kek.Sealed(k.Private) || k.Private[0] == derSequence {
			clear++
		}
	}
	return clear, nil
}

// publicJWK is the published form of priv: kty, n, e, plus kid, alg, use.
func publicJWK(priv *rsa.PrivateKey, kid string) (jwk.Key, error) {
	pub, err := jwk.FromRaw(&priv.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("keys: public jwk: %w", err)
	}
	for _, kv := range []struct {
		k string
		v any
	}{{jwk.KeyIDKey, kid}, {jwk.AlgorithmKey, jwa.RS256}, {jwk.KeyUsageKey, jwk.ForSignature}} {
		if err := pub.Set(kv.k, kv.v); err != nil {
			return nil, fmt.Errorf("keys: public jwk %s: %w", kv.k, err)
		}
	}
	return pub, nil
}

// published returns the encoded key set at t, encoding it when t left the
// interval of the cached encoding.
func (ks *keySet) published(t time.Time, retention time.Duration) (*encoded, error) {
	if e := ks.enc.Load(); e != nil && e.covers(t) {
		return e, nil
	}
	enc := &encoded{set: jwk.NewSet()}
	for i, e := range ks.entries {
		if end := e.unpublishedAt(retention); !end.IsZero() {
			if !t.Before(end) && (enc.from.IsZero() || end.After(enc.from)) {
				enc.from = end
			}
			if t.Before(end) && (enc.until.IsZero() || end.Before(enc.until)) {
				enc.until = end
			}
		}
		if e.publishedAt(t, retention) {
			if err := enc.set.AddKey(ks.pub[i]); err != nil {
				return nil, fmt.Errorf("keys: build key set: %w", err)
			}
		}
	}
	enc.empty = enc.set.Len() == 0
	b, err := json.Marshal(enc.set)
	if err != nil {
		return nil, fmt.Errorf("keys: encode key set: %w", err)
	}
	enc.json = b
	ks.enc.Store(enc)
	return enc, nil
}

// publishedKey returns the index of the published key kid at t, or -1.
func (ks *keySet) publishedKey(kid string, t time.Time, retention time.Duration) int {
	for i, e := range ks.entries {
		if e.kid == kid {
			if e.publishedAt(t, retention) {
				return i
			}
			return -1
		}
	}
	return -1
}
