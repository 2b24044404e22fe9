package keys

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// clock is an injected, manually advanced clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newManager(t testing.TB, a *fsmtest.Applier, c *clock, mod func(*Config)) *Manager {
	t.Helper()
	cfg := Config{State: a.State(), Applier: a, Now: c.Now}
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg)
}

func storedKids(t testing.TB, a *fsmtest.Applier) []string {
	t.Helper()
	ks, _, err := a.State().Keys()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range ks {
		out = append(out, k.Kid)
	}
	sort.Strings(out)
	return out
}

// jwksKids parses JWKS bytes, checks the shape of every key (exactly the
// public fields kty, use, alg, kid, n, e) and returns the kids in order.
func jwksKids(t testing.TB, b []byte) []string {
	t.Helper()
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("JWKS is not JSON: %v", err)
	}
	var kids []string
	for _, k := range doc.Keys {
		var fields []string
		for f := range k {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		if got, want := fields, []string{"alg", "e", "kid", "kty", "n", "use"}; !slices.Equal(got, want) {
			t.Errorf("JWK fields: got %q, want %q", got, want)
		}
		for f, want := range map[string]string{"kty": "RSA", "use": "sig", "alg": "RS256", "e": "AQAB"} {
			if got := k[f]; got != want {
				t.Errorf("JWK %s: got %v, want %q", f, got, want)
			}
		}
		if n, _ := k["n"].(string); len(n) != 342 { // 256 bytes, base64url
			t.Errorf("JWK n: got %d characters, want 342", len(n))
		}
		kid, _ := k["kid"].(string)
		kids = append(kids, kid)
	}
	return kids
}

// verifyWithJWKS checks tok the way a relying party would: jwx against the
// published JWKS bytes, kid-matched, RS256, validated at the injected clock.
func verifyWithJWKS(t testing.TB, jwks, tok []byte, c *clock) error {
	t.Helper()
	set, err := jwk.Parse(jwks)
	if err != nil {
		t.Fatalf("jwk.Parse: %v", err)
	}
	_, err = jwt.Parse(tok, jwt.WithKeySet(set, jws.WithRequireKid(true)), jwt.WithClock(jwt.ClockFunc(c.Now)))
	return err
}

func header(t testing.TB, tok []byte) jws.Headers {
	t.Helper()
	msg, err := jws.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	return msg.Signatures()[0].ProtectedHeaders()
}

func claims(c *clock) map[string]any {
	now := c.Now()
	return map[string]any{
		"iss": "https://issuer.test", "sub": "user", "aud": []string{"client"},
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
	}
}

func states(t testing.TB, m *Manager) map[string]Info {
	t.Helper()
	list, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Info{}
	for _, in := range list {
		out[in.Kid] = in
	}
	return out
}

// TestLifecycle walks one rotation through next, active, retired and
// removed, checking at each step the JWKS, the signer, the derived states,
// the stored keys and which earlier tokens still verify.
func TestLifecycle(t *testing.T) {
	const lead, retention = 10 * time.Minute, 60 * time.Minute
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, func(cfg *Config) { cfg.PublishLead, cfg.Retention = lead, retention })
	ctx := context.Background()
	kid := map[string]string{} // name -> kid

	type issued struct {
		tok  []byte
		name string
	}
	var tokens []issued

	steps := []struct {
		name       string
		advance    time.Duration
		action     string // "", "tick", "rotate"
		newKey     string // name given to the key the action adds
		wantJWKS   []string
		wantSigner string
		wantStates map[string]string
		wantStored []string
	}{
		{name: "first tick adds an active key", action: "tick", newKey: "k1",
			wantJWKS: []string{"k1"}, wantSigner: "k1", wantStates: map[string]string{"k1": StateActive}, wantStored: []string{"k1"}},
		{name: "rotation publishes a next key", action: "rotate", newKey: "k2",
			wantJWKS: []string{"k1", "k2"}, wantSigner: "k1", wantStates: map[string]string{"k1": StateActive, "k2": StateNext}, wantStored: []string{"k1", "k2"}},
		{name: "next key waits out the publish lead", advance: lead - time.Second, action: "tick",
			wantJWKS: []string{"k1", "k2"}, wantSigner: "k1", wantStates: map[string]string{"k1": StateActive, "k2": StateNext}, wantStored: []string{"k1", "k2"}},
		{name: "next key activates, old key retires", advance: time.Second,
			wantJWKS: []string{"k1", "k2"}, wantSigner: "k2", wantStates: map[string]string{"k1": StateRetired, "k2": StateActive}, wantStored: []string{"k1", "k2"}},
		{name: "retired key stays published through retention", advance: retention - time.Second, action: "tick",
			wantJWKS: []string{"k1", "k2"}, wantSigner: "k2", wantStates: map[string]string{"k1": StateRetired, "k2": StateActive}, wantStored: []string{"k1", "k2"}},
		{name: "retention ends: unpublished by time alone", advance: time.Second,
			wantJWKS: []string{"k2"}, wantSigner: "k2", wantStates: map[string]string{"k2": StateActive}, wantStored: []string{"k1", "k2"}},
		{name: "leader loop removes it", action: "tick",
			wantJWKS: []string{"k2"}, wantSigner: "k2", wantStates: map[string]string{"k2": StateActive}, wantStored: []string{"k2"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c.Advance(st.advance)
			before := storedKids(t, a)
			switch st.action {
			case "tick":
				if err := m.Tick(ctx); err != nil {
					t.Fatal(err)
				}
			case "rotate":
				in, err := m.Rotate(ctx, false)
				if err != nil {
					t.Fatal(err)
				}
				if in.State != StateNext || !in.ActivatesAt.Equal(c.Now().Add(lead)) {
					t.Errorf("Rotate: got state %q activates %v, want next at %v", in.State, in.ActivatesAt, c.Now().Add(lead))
				}
			}
			if st.newKey != "" {
				after := storedKids(t, a)
				added := slices.DeleteFunc(after, func(k string) bool { return slices.Contains(before, k) })
				if len(added) != 1 {
					t.Fatalf("got %d new keys, want 1", len(added))
				}
				kid[st.newKey] = added[0]
			}
			names := func(ns []string) []string {
				out := make([]string, len(ns))
				for i, n := range ns {
					out[i] = kid[n]
				}
				return out
			}

			jwks, err := m.JWKS()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := jwksKids(t, jwks), names(st.wantJWKS); !slices.Equal(got, want) {
				t.Errorf("JWKS kids: got %q, want %q", got, want)
			}
			want := names(st.wantStored)
			sort.Strings(want)
			if got := storedKids(t, a); !slices.Equal(got, want) {
				t.Errorf("stored kids: got %q, want %q", got, want)
			}
			got := states(t, m)
			if len(got) != len(st.wantStates) {
				t.Errorf("List: got %d keys, want %d", len(got), len(st.wantStates))
			}
			for n, ws := range st.wantStates {
				in := got[kid[n]]
				if in.State != ws {
					t.Errorf("state of %s: got %q, want %q", n, in.State, ws)
				}
				if (in.RetiredAt != nil) != (ws == StateRetired) {
					t.Errorf("retired_at of %s: got %v, want set only when retired", n, in.RetiredAt)
				}
			}
			if in, ok := got[kid["k1"]]; ok && in.State == StateRetired {
				if k2 := got[kid["k2"]]; !in.RetiredAt.Equal(*k2.ActivatesAt) {
					t.Errorf("k1 retired_at: got %v, want k2's activates_at %v", in.RetiredAt, k2.ActivatesAt)
				}
			}

			tok, err := m.Sign(claims(c), TypJWT)
			if err != nil {
				t.Fatal(err)
			}
			h := header(t, tok)
			if h.KeyID() != kid[st.wantSigner] {
				t.Errorf("kid header: got %q, want %q (%s)", h.KeyID(), kid[st.wantSigner], st.wantSigner)
			}
			if h.Type() != TypJWT || h.Algorithm() != jwa.RS256 {
				t.Errorf("header: got typ %q alg %q, want JWT RS256", h.Type(), h.Algorithm())
			}
			if err := verifyWithJWKS(t, jwks, tok, c); err != nil {
				t.Errorf("jwx rejects a fresh token against the JWKS: %v", err)
			}
			tokens = append(tokens, issued{tok, st.wantSigner})
			for _, is := range tokens {
				_, err := m.Verify(is.tok)
				if published := slices.Contains(st.wantJWKS, is.name); (err == nil) != published {
					t.Errorf("Verify of a token by %s: got err %v, want success %v", is.name, err, published)
				}
			}
		})
	}
}

func TestImmediateRotationSupersedesPending(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	ctx := context.Background()
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	k1 := storedKids(t, a)[0]
	k2, err := m.Rotate(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	k3, err := m.Rotate(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if k3.State != StateActive || !k3.ActivatesAt.Equal(c.Now()) {
		t.Errorf("immediate Rotate: got state %q activates %v, want active at %v", k3.State, k3.ActivatesAt, c.Now())
	}
	want := []string{k1, k3.Kid}
	sort.Strings(want)
	if got := storedKids(t, a); !slices.Equal(got, want) {
		t.Errorf("stored: got %q, want %q (pending %s dropped)", got, want, k2.Kid)
	}
	jwks, err := m.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jwksKids(t, jwks), []string{k1, k3.Kid}; !slices.Equal(got, want) {
		t.Errorf("JWKS kids: got %q, want %q", got, want)
	}
	tok, err := m.Sign(claims(c), TypLogout)
	if err != nil {
		t.Fatal(err)
	}
	if h := header(t, tok); h.KeyID() != k3.Kid || h.Type() != TypLogout {
		t.Errorf("header: got kid %q typ %q, want %q %q", h.KeyID(), h.Type(), k3.Kid, TypLogout)
	}
	st := states(t, m)
	if in := st[k1]; in.State != StateRetired || !in.RetiredAt.Equal(c.Now()) {
		t.Errorf("k1: got %q retired at %v, want retired at %v", in.State, in.RetiredAt, c.Now())
	}
	// The pending key would have activated now; it must not overtake k3.
	c.Advance(10 * time.Minute)
	if tok, err = m.Sign(claims(c), TypJWT); err != nil || header(t, tok).KeyID() != k3.Kid {
		t.Errorf("after the old pending time: got kid %q (err %v), want %q", header(t, tok).KeyID(), err, k3.Kid)
	}
}

// TestImmediateRotationAtActivationInstant: an immediate key proposed in
// the instant the current key activated must still take over (ties in
// ActivatesAt are broken by kid, which is random).
func TestImmediateRotationAtActivationInstant(t *testing.T) {
	for range 4 {
		a, c := fsmtest.New(t), newClock()
		m := newManager(t, a, c, nil)
		ctx := context.Background()
		if err := m.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		in, err := m.Rotate(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(time.Nanosecond); !in.ActivatesAt.Equal(want) {
			t.Errorf("activates_at: got %v, want %v", in.ActivatesAt, want)
		}
		c.Advance(time.Nanosecond)
		tok, err := m.Sign(claims(c), TypJWT)
		if err != nil {
			t.Fatal(err)
		}
		if got := header(t, tok).KeyID(); got != in.Kid {
			t.Errorf("signer: got %q, want the immediate key %q", got, in.Kid)
		}
		if got := len(storedKids(t, a)); got != 2 {
			t.Errorf("stored: got %d keys, want 2 (the current key is not superseded)", got)
		}
	}
}

func TestScheduledRotation(t *testing.T) {
	const every, lead = 24 * time.Hour, 10 * time.Minute
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, func(cfg *Config) { cfg.RotateEvery = every })
	ctx := context.Background()
	tick := func(wantKeys int) {
		t.Helper()
		if err := m.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(storedKids(t, a)); got != wantKeys {
			t.Fatalf("at %v: got %d stored keys, want %d", c.Now().Sub(t0), got, wantKeys)
		}
	}
	tick(1)
	k1 := storedKids(t, a)[0]
	c.Advance(every - lead - time.Second)
	tick(1)
	c.Advance(time.Second)
	tick(2)
	var next Info
	for _, in := range states(t, m) {
		if in.Kid != k1 {
			next = in
		}
	}
	if next.State != StateNext || !next.ActivatesAt.Equal(t0.Add(every)) {
		t.Errorf("scheduled key: got %q activating %v, want next at %v", next.State, next.ActivatesAt, t0.Add(every))
	}
	tick(2) // a next key exists: nothing more
	c.Advance(lead)
	tick(2)
	if st := states(t, m); st[next.Kid].State != StateActive || st[k1].State != StateRetired {
		t.Errorf("at the scheduled time: got %q/%q, want active/retired", st[next.Kid].State, st[k1].State)
	}
	c.Advance(DefaultRetention)
	tick(1)
	if got := storedKids(t, a); got[0] != next.Kid {
		t.Errorf("after retention: got %q, want %q", got, next.Kid)
	}

	// A leader that comes back long after the schedule still honours the
	// publish lead.
	c.Advance(3 * every)
	tick(2)
	for _, in := range states(t, m) {
		if in.State == StateNext && !in.ActivatesAt.Equal(c.Now().Add(lead)) {
			t.Errorf("late key: activates %v, want %v", in.ActivatesAt, c.Now().Add(lead))
		}
	}
}

// TestTheFirstKeySignsBeforeItsActivation: the only key signs even
// before its activation (a node whose clock runs behind the leader that
// made it, a rotation on an empty store): it has no predecessor, and it
// is published; Tick then adds no other.
func TestTheFirstKeySignsBeforeItsActivation(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	ctx := context.Background()
	if _, err := m.Sign(claims(c), TypJWT); !errors.Is(err, ErrNoKey) {
		t.Errorf("Sign without a key: got %v, want ErrNoKey", err)
	}
	in, err := m.Rotate(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := m.Sign(claims(c), TypJWT)
	if err != nil || header(t, tok).KeyID() != in.Kid {
		t.Errorf("Sign with only a next key: %v, want it signed by %s", err, in.Kid)
	}
	if _, err := m.JWKS(); err != nil {
		t.Errorf("JWKS with a next key: got %v, want the key published", err)
	}
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(storedKids(t, a)); got != 1 {
		t.Errorf("after Tick: %d keys, want the one", got)
	}
}

func TestClamps(t *testing.T) {
	tests := []struct {
		name                       string
		in                         Config
		lead, retention, rotateEvy time.Duration
	}{
		{"defaults", Config{}, 10 * time.Minute, 60 * time.Minute, 30 * 24 * time.Hour},
		{"publish lead below JWKS cache", Config{PublishLead: time.Minute}, 301 * time.Second, 60 * time.Minute, 30 * 24 * time.Hour},
		{"publish lead at 300s", Config{PublishLead: 300 * time.Second}, 301 * time.Second, 60 * time.Minute, 30 * 24 * time.Hour},
		{"retention below an hour", Config{Retention: 10 * time.Minute}, 10 * time.Minute, 60 * time.Minute, 30 * 24 * time.Hour},
		{"longer values kept", Config{PublishLead: time.Hour, Retention: 2 * time.Hour, RotateEvery: 48 * time.Hour}, time.Hour, 2 * time.Hour, 48 * time.Hour},
		{"rotation below publish lead", Config{PublishLead: 20 * time.Minute, RotateEvery: time.Minute}, 20 * time.Minute, 60 * time.Minute, 20 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.in)
			if m.cfg.PublishLead != tt.lead || m.cfg.Retention != tt.retention || m.cfg.RotateEvery != tt.rotateEvy {
				t.Errorf("got lead %v retention %v every %v, want %v %v %v",
					m.cfg.PublishLead, m.cfg.Retention, m.cfg.RotateEvery, tt.lead, tt.retention, tt.rotateEvy)
			}
		})
	}

	// The clamps hold in behaviour too.
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, func(cfg *Config) { cfg.PublishLead, cfg.Retention = time.Second, time.Second })
	ctx := context.Background()
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := m.Rotate(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := in.ActivatesAt.Sub(c.Now()); got != MinPublishLead {
		t.Errorf("publish lead: got %v, want %v", got, MinPublishLead)
	}
	c.Advance(MinPublishLead + MinRetention - time.Second)
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	jwks, _ := m.JWKS()
	if got := len(jwksKids(t, jwks)); got != 2 {
		t.Errorf("one second before 60 min of retention: got %d published keys, want 2", got)
	}
}

func TestKidStableAcrossRestart(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m1 := newManager(t, a, c, nil)
	if err := m1.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok1, err := m1.Sign(claims(c), TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	j1, _ := m1.JWKS()

	m2 := newManager(t, a, c, nil) // a restarted node on the same state
	if err := m2.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok2, err := m2.Sign(claims(c), TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := header(t, tok2).KeyID(), header(t, tok1).KeyID(); got != want {
		t.Errorf("kid after restart: got %q, want %q", got, want)
	}
	j2, _ := m2.JWKS()
	if string(j1) != string(j2) {
		t.Errorf("JWKS after restart: got %s, want %s", j2, j1)
	}
	if _, err := m2.Verify(tok1); err != nil {
		t.Errorf("restarted node rejects a token of the first: %v", err)
	}
}

func TestNoKey(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	if _, err := m.Sign(claims(c), TypJWT); !errors.Is(err, ErrNoKey) {
		t.Errorf("Sign: got %v, want ErrNoKey", err)
	}
	if _, err := m.JWKS(); !errors.Is(err, ErrNoKey) {
		t.Errorf("JWKS: got %v, want ErrNoKey", err)
	}
	if _, err := m.PublicSet(); !errors.Is(err, ErrNoKey) {
		t.Errorf("PublicSet: got %v, want ErrNoKey", err)
	}
	if list, err := m.List(); err != nil || len(list) != 0 {
		t.Errorf("List: got %v, %v, want empty", list, err)
	}
}

func TestApplierFailure(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	boom := errors.New("no leader")
	a.Fail = boom
	if _, err := m.Rotate(context.Background(), true); !errors.Is(err, boom) {
		t.Errorf("Rotate: got %v, want %v", err, boom)
	}
	if err := m.Tick(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Tick: got %v, want %v", err, boom)
	}
}

func TestSignRejectsNonObjectClaims(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	if err := m.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, claims := range []any{"a string", []byte(`{"sub":"x"}`), 42, nil} {
		if _, err := m.Sign(claims, TypJWT); err == nil {
			t.Errorf("Sign(%T): got nil error, want one", claims)
		}
	}
	tok := jwt.New()
	tok.Set(jwt.SubjectKey, "x")
	tok.Set(jwt.AudienceKey, []string{"client"})
	for _, claims := range []any{tok, json.RawMessage(`{"sub":"x"}`), struct {
		Sub string `json:"sub"`
	}{"x"}} {
		signed, err := m.Sign(claims, "")
		if err != nil {
			t.Errorf("Sign(%T): %v", claims, err)
			continue
		}
		if h := header(t, signed); h.Type() != "" || h.KeyID() == "" {
			t.Errorf("Sign(%T) header: got typ %q kid %q, want no typ and a kid", claims, h.Type(), h.KeyID())
		}
		got, err := m.Verify(signed)
		var c struct {
			Sub string `json:"sub"`
		}
		if err != nil || json.Unmarshal(got, &c) != nil || c.Sub != "x" {
			t.Errorf("Verify(Sign(%T)): got %s, %v", claims, got, err)
		}
	}
}

func TestVerify(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	if err := m.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	kid := storedKids(t, a)[0]
	payload, _ := json.Marshal(claims(c))
	foreign, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signWith := func(alg jwa.SignatureAlgorithm, key any, kid string) []byte {
		t.Helper()
		h := jws.NewHeaders()
		if kid != "" {
			h.Set(jws.KeyIDKey, kid)
		}
		tok, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good, err := m.Sign(claims(c), TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	none := func() []byte {
		h := jws.NewHeaders()
		h.Set(jws.KeyIDKey, kid)
		tok, err := jws.Sign(payload, jws.WithInsecureNoSignature(jws.WithProtectedHeaders(h)))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}()
	tampered := slices.Clone(good)
	if i := bytes.IndexByte(tampered, '.') + 5; tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	jsonSerialized, err := jws.Sign(payload, jws.WithJSON(), jws.WithKey(jwa.RS256, foreign))
	if err != nil {
		t.Fatal(err)
	}
	// The last character of the signature carries unused low bits: a
	// different spelling of it decodes to the same bytes under a lenient
	// decoder. Only the canonical spelling may verify.
	respelled := slices.Clone(good)
	last := respelled[len(respelled)-1]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	respelled[len(respelled)-1] = alphabet[(strings.IndexByte(alphabet, last)^1)%64]
	ks, err := m.current()
	if err != nil {
		t.Fatal(err)
	}
	ours := func(payload string) []byte { // signed by our active key
		t.Helper()
		h := jws.NewHeaders()
		h.Set(jws.KeyIDKey, kid)
		tok, err := jws.Sign([]byte(payload), jws.WithKey(jwa.RS256, ks.priv[0], jws.WithProtectedHeaders(h)))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	c.Advance(time.Hour) // the good token has expired: Verify does not care

	tests := []struct {
		name string
		tok  []byte
		ok   bool
	}{
		{"ours, expired", good, true},
		{"alg none", none, false},
		{"HS256 with our kid", signWith(jwa.HS256, []byte("0123456789abcdef0123456789abcdef"), kid), false},
		{"RS256 with an unknown kid", signWith(jwa.RS256, foreign, "unknown"), false},
		{"RS256 without kid", signWith(jwa.RS256, foreign, ""), false},
		{"RS256 by another key under our kid", signWith(jwa.RS256, foreign, kid), false},
		{"PS256 by another key under our kid", signWith(jwa.PS256, foreign, kid), false},
		{"tampered", tampered, false},
		{"JSON serialization", jsonSerialized, false},
		{"garbage", []byte("a.b.c"), false},
		{"too large", append(slices.Clone(good), make([]byte, MaxTokenSize)...), false},
		{"trailing newline", append(slices.Clone(good), '\n'), false},
		{"leading space", append([]byte(" "), good...), false},
		{"non-canonical last character", respelled, false},
		{"ours, claims a JSON array", ours(`["sub"]`), false},
		{"ours, claims a JSON string", ours(`"sub"`), false},
		{"ours, claims not JSON", ours(`{"sub":`), false},
		{"ours, claims an object then more", ours(`{"sub":"x"}{}`), false},
		{"ours, claims an object", ours(`{"sub":"x"}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Verify(tt.tok)
			if tt.ok && err != nil {
				t.Errorf("got %v, want success", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("got %v, want ErrInvalidToken", err)
			}
			// Only an unknown kid says so (callers catch up and retry).
			if unknown := strings.HasPrefix(tt.name, "RS256 with an unknown kid") || tt.name == "RS256 without kid"; errors.Is(err, ErrUnknownKey) != unknown {
				t.Errorf("ErrUnknownKey: got %v for %v", errors.Is(err, ErrUnknownKey), err)
			}
		})
	}

	// PublicSet verifies our tokens with jwx, and is a copy.
	set, err := m.PublicSet()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jwt.Parse(good, jwt.WithKeySet(set), jwt.WithValidate(false)); err != nil {
		t.Errorf("jwx with PublicSet: %v", err)
	}
	k, _ := set.Key(0)
	set.RemoveKey(k)
	if again, _ := m.PublicSet(); again.Len() != 1 {
		t.Errorf("PublicSet after a caller modified its copy: got %d keys, want 1", again.Len())
	}
	if _, ok := k.(jwk.RSAPublicKey); !ok {
		t.Errorf("PublicSet key: got %T, want a public RSA key", k)
	}
}

// TestCacheFollowsStore checks that a node sees keys written by another
// node through the replicated state, with and without the OnApply hook, and
// that the parsed set is reused while nothing changes.
func TestCacheFollowsStore(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		name := map[bool]string{false: "polling applied index", true: "OnApply hook"}[hooked]
		t.Run(name, func(t *testing.T) {
			a, c := fsmtest.New(t), newClock()
			writer := newManager(t, a, c, nil)
			reader := newManager(t, a, c, nil)
			if hooked {
				a.FSM.OnApply = reader.OnApply
			}
			ctx := context.Background()
			if err := writer.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			signer := func() string {
				t.Helper()
				tok, err := reader.Sign(claims(c), TypJWT)
				if err != nil {
					t.Fatal(err)
				}
				return header(t, tok).KeyID()
			}
			k1 := signer()
			s1 := reader.snap.Load()
			signer()
			if reader.snap.Load() != s1 {
				t.Errorf("snapshot replaced although nothing was applied")
			}
			if _, err := a.Apply(ctx, fsm.MustCommand(fsm.TypeNoop, struct{}{})); err != nil {
				t.Fatal(err)
			}
			signer()
			s2 := reader.snap.Load()
			if hooked && s2 != s1 {
				t.Errorf("hooked: snapshot replaced after a non-key command")
			}
			if s2.set != s1.set {
				t.Errorf("parsed key set rebuilt although the key set did not change")
			}
			c.Advance(time.Second)
			k2, err := writer.Rotate(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := signer(); got != k2.Kid {
				t.Errorf("after another node's rotation: got kid %q, want %q (was %q)", got, k2.Kid, k1)
			}
			if s3 := reader.snap.Load(); s3.set.priv[slices.IndexFunc(s3.set.entries, func(e entry) bool { return e.kid == k1 })] !=
				s1.set.priv[0] {
				t.Errorf("parsed key of an unchanged kid was not reused")
			}
		})
	}
}

// TestLateHook: changes applied before the hook was installed must not be
// missed once the hook reports only unrelated commands.
func TestLateHook(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	writer := newManager(t, a, c, nil)
	reader := newManager(t, a, c, nil)
	ctx := context.Background()
	if err := writer.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Sign(claims(c), TypJWT); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	k2, err := writer.Rotate(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	reader.OnApply([]fsm.Type{fsm.TypeNoop})
	tok, err := reader.Sign(claims(c), TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	if got := header(t, tok).KeyID(); got != k2.Kid {
		t.Errorf("got kid %q, want %q", got, k2.Kid)
	}
}

func TestJWKSReencodedOnlyAtBoundaries(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	ctx := context.Background()
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Rotate(ctx, false); err != nil {
		t.Fatal(err)
	}
	j1, _ := m.JWKS()
	c.Advance(DefaultPublishLead) // activation: same published set
	j2, _ := m.JWKS()
	if &j1[0] != &j2[0] {
		t.Errorf("JWKS re-encoded when a next key activated")
	}
	c.Advance(DefaultRetention)
	j3, _ := m.JWKS()
	if len(jwksKids(t, j3)) != 1 {
		t.Errorf("JWKS after retention: got %s, want one key", j3)
	}
	// A clock that steps back sees the earlier set again.
	c.Advance(-time.Minute)
	if j4, _ := m.JWKS(); len(jwksKids(t, j4)) != 2 {
		t.Errorf("JWKS before the boundary: got %s, want two keys", j4)
	}
}

func TestRunAddsFirstKey(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(storedKids(t, a)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run added no key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if got := len(storedKids(t, a)); got != 1 {
		t.Errorf("got %d keys, want 1", got)
	}
}

func TestConcurrentSignAndRotate(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, nil)
	a.FSM.OnApply = m.OnApply
	ctx := context.Background()
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				tok, err := m.Sign(claims(c), TypJWT)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Verify(tok); err != nil {
					t.Error(err)
				}
				if _, err := m.JWKS(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 2 {
		if _, err := m.Rotate(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func BenchmarkSign(b *testing.B) {
	a, c := fsmtest.New(b), newClock()
	m := newManager(b, a, c, nil)
	a.FSM.OnApply = m.OnApply
	if err := m.Tick(context.Background()); err != nil {
		b.Fatal(err)
	}
	cl := claims(c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Sign(cl, TypJWT); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJWKS(b *testing.B) {
	a, c := fsmtest.New(b), newClock()
	m := newManager(b, a, c, nil)
	a.FSM.OnApply = m.OnApply
	ctx := context.Background()
	if err := m.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := m.Rotate(ctx, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.JWKS(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	m, tok, _ := signedForBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// signedForBench is a Manager with an active key, a token it signed and
// that key.
func signedForBench(b *testing.B) (*Manager, []byte, *rsa.PrivateKey) {
	a, c := fsmtest.New(b), newClock()
	m := newManager(b, a, c, nil)
	a.FSM.OnApply = m.OnApply
	if err := m.Tick(context.Background()); err != nil {
		b.Fatal(err)
	}
	tok, err := m.Sign(claims(c), TypJWT)
	if err != nil {
		b.Fatal(err)
	}
	ks, err := m.current()
	if err != nil {
		b.Fatal(err)
	}
	return m, tok, ks.priv[0]
}

// BenchmarkVerifyCeiling is the floor under BenchmarkVerify: one RS256
// check of the same token with crypto/rsa alone (hash the signing input,
// decode the signature, verify), no header or claims parsing.
func BenchmarkVerifyCeiling(b *testing.B) {
	_, tok, priv := signedForBench(b)
	pub := &priv.PublicKey
	dot := bytes.LastIndexByte(tok, '.')
	b.ReportAllocs()
	for b.Loop() {
		sig, err := base64.RawURLEncoding.DecodeString(string(tok[dot+1:]))
		if err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(tok[:dot])
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignCeiling is the floor under BenchmarkSign: one RS256
// signature (crypto/rsa, precomputed CRT values) over a signing input of
// the same size, with its base64url encoding, no header or claims work.
func BenchmarkSignCeiling(b *testing.B) {
	_, tok, priv := signedForBench(b)
	input := tok[:bytes.LastIndexByte(tok, '.')]
	b.ReportAllocs()
	for b.Loop() {
		sum := sha256.Sum256(input)
		sig, err := rsa.SignPKCS1v15(nil, priv, crypto.SHA256, sum[:])
		if err != nil {
			b.Fatal(err)
		}
		_ = base64.RawURLEncoding.EncodeToString(sig)
	}
}
