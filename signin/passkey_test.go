package signin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// authenticator is a software passkey authenticator: one ES256 key, no
// attestation ("none"), user presence and verification always given.
type authenticator struct {
	t      testing.TB
	key    *ecdsa.PrivateKey
	id     []byte
	rpID   string
	origin string
	count  uint32
}

func newAuthenticator(t testing.TB, rpID string) *authenticator {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	rand.Read(id)
	return &authenticator{t: t, key: key, id: id, rpID: rpID, origin: "https://" + rpID}
}

var b64 = base64.RawURLEncoding

// challenge reads the challenge of a ceremony's options.
func (a *authenticator) challenge(options string) string {
	a.t.Helper()
	var o struct {
		PublicKey struct {
			Challenge string `json:"challenge"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(options), &o); err != nil || o.PublicKey.Challenge == "" {
		a.t.Fatalf("options %s: %v", options, err)
	}
	return o.PublicKey.Challenge
}

func (a *authenticator) clientData(typ, challenge string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": a.origin, "crossOrigin": false})
	return b
}

// authData is the authenticator data: rp id hash, flags, counter and,
// when attested, the credential and its COSE key.
func (a *authenticator) authData(attested bool) []byte {
	rp := sha256.Sum256([]byte(a.rpID))
	out := append([]byte{}, rp[:]...)
	flags := byte(0x01 | 0x04) // user present, user verified
	if attested {
		flags |= 0x40
	}
	out = append(out, flags)
	out = binary.BigEndian.AppendUint32(out, a.count)
	if attested {
		out = append(out, make([]byte, 16)...) // aaguid
		out = binary.BigEndian.AppendUint16(out, uint16(len(a.id)))
		out = append(out, a.id...)
		x, y := make([]byte, 32), make([]byte, 32)
		a.key.X.FillBytes(x)
		a.key.Y.FillBytes(y)
		cose, err := cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: x, -3: y})
		if err != nil {
			a.t.Fatal(err)
		}
		out = append(out, cose...)
	}
	return out
}

// create answers a registration ceremony's options with a credential.
func (a *authenticator) create(options string) string {
	a.t.Helper()
	cdj := a.clientData("webauthn.create", a.challenge(options))
	ao, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": a.authData(true)})
	if err != nil {
		a.t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": b64.EncodeToString(a.id), "rawId": b64.EncodeToString(a.id), "type": "public-key",
		"response": map[string]string{"clientDataJSON": b64.EncodeToString(cdj), "attestationObject": b64.EncodeToString(ao)}})
	return string(b)
}

// get answers an assertion ceremony's options for userID, signing with
// key (the authenticator's own when nil).
func (a *authenticator) get(options, userID string, key *ecdsa.PrivateKey) string {
	a.t.Helper()
	if key == nil {
		key = a.key
	}
	cdj := a.clientData("webauthn.get", a.challenge(options))
	ad := a.authData(false)
	sum := sha256.Sum256(cdj)
	digest := sha256.Sum256(append(append([]byte{}, ad...), sum[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		a.t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": b64.EncodeToString(a.id), "rawId": b64.EncodeToString(a.id), "type": "public-key",
		"response": map[string]string{"clientDataJSON": b64.EncodeToString(cdj), "authenticatorData": b64.EncodeToString(ad),
			"signature": b64.EncodeToString(sig), "userHandle": b64.EncodeToString([]byte(userID))}})
	return string(b)
}

// TestPasskeys: a passkey registers once per ceremony; its assertion is a
// second factor (amr hwk) under the code throttle; an assertion whose
// counter did not grow (a cloned authenticator), one signed by another
// key, and one for a spent challenge are refused as wrong codes; and the
// second-factor page offers passkeys once one is enrolled.
func TestPasskeys(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Issuer = "https://idp.example" })
	if h.p.wa == nil {
		t.Fatal("passkeys are off for a domain-name issuer")
	}
	ctx := context.Background()
	r := httptest.NewRequest(http.MethodPost, "/authorize", nil)
	u, err := h.applier.State().User(hUser)
	if err != nil {
		t.Fatal(err)
	}
	factors := func() fsm.Factors {
		f, err := h.applier.State().Factors(hUser)
		if err != nil && !errors.Is(err, fsm.ErrNotFound) {
			t.Fatal(err)
		}
		return f
	}
	a := newAuthenticator(t, "idp.example")

	opts, id, err := h.p.beginPasskeyRegistration(ctx, u, factors())
	if err != nil {
		t.Fatal(err)
	}
	cred := a.create(opts)
	if err := h.p.finishPasskeyRegistration(ctx, u, factors(), id, cred, "Laptop", nil); err != nil {
		t.Fatalf("registration: %v", err)
	}
	if err := h.p.finishPasskeyRegistration(ctx, u, factors(), id, cred, "Again", nil); !errors.Is(err, errCodeWrong) {
		t.Fatalf("a registration challenge used twice: %v", err)
	}
	f := factors()
	if len(f.Passkeys) != 1 || f.Passkeys[0].Name != "Laptop" {
		t.Fatalf("passkeys: %+v", f.Passkeys)
	}

	assert := func(key *ecdsa.PrivateKey) (string, error) {
		t.Helper()
		opts, cid, err := h.p.beginPasskeyAssertion(ctx, u, factors())
		if err != nil {
			t.Fatal(err)
		}
		amr, _, err := h.p.checkFactor(ctx, r, u, factors(), posted{method: webui.MethodPasskey, credential: a.get(opts, hUser, key)}, cid, "")
		return amr, err
	}
	a.count = 1
	if amr, err := assert(nil); err != nil || amr != authn.AMRPasskey {
		t.Fatalf("assertion: %q %v", amr, err)
	}
	if _, err := assert(nil); !errors.Is(err, errCodeWrong) {
		t.Fatalf("a counter that did not grow: %v", err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	a.count = 2
	if _, err := assert(other); !errors.Is(err, errCodeWrong) {
		t.Fatalf("signed by another key: %v", err)
	}
	a.count = 3
	if amr, err := assert(nil); err != nil || amr != authn.AMRPasskey {
		t.Fatalf("assertion after the refusals: %q %v", amr, err)
	}

	// The second-factor page of a session offers the passkey.
	sess := fsm.SSOSession{ID: "s1", UserID: hUser}
	w := httptest.NewRecorder()
	pd := &authn.Pending{SSOID: "s1"}
	_, _, ok := h.p.Step(w, httptest.NewRequest(http.MethodGet, "/authorize", nil), &authn.Step{
		Pending: pd, Seal: func() (string, error) { return "sealed", nil }, Show: authn.StageMFA, ClientID: hPublic,
	}, sess, u)
	if ok || w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `value="passkey"`) || pd.Stage != authn.StageMFA {
		t.Fatalf("second-factor page: ok %v, %d, stage %q\n%s", ok, w.Code, pd.Stage, w.Body.String())
	}
}
