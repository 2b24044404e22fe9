package admin

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/httpx"
)

// enrollTOTP is POST /users/{id}/totp: a fresh authenticator-app secret,
// sealed under the KEK before it is replicated, answered once in the clear
// with its otpauth URI. It replaces an earlier one.
func (a *api) enrollTOTP(w http.ResponseWriter, r *http.Request) {
	u, ok := a.pathUser(w, r)
	if !ok {
		return
	}
	secret, uri, err := factor.NewTOTPSecret(a.issuerLabel(), u.Email)
	if err != nil {
		a.unavailable(w, r, "totp secret", err)
		return
	}
	sealed, err := a.KEK.Seal([]byte(secret), factor.TOTPAAD(u.ID))
	if err != nil {
		a.unavailable(w, r, "seal totp secret", err)
		return
	}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeSetTOTP, fsm.SetTOTP{UserID: u.ID, Secret: sealed, At: a.now(), EndSessions: a.endSessions()})); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, struct {
		Secret string `json:"secret"`
		URI    string `json:"uri"`
	}{secret, uri})
}

// removeTOTP is DELETE /users/{id}/totp.
func (a *api) removeTOTP(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeSetTOTP, fsm.SetTOTP{UserID: id, At: a.now(), EndSessions: a.endSessions()})); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

// newRecoveryCodes is POST /users/{id}/recovery-codes: ten fresh codes,
// stored as hashes, shown this once; earlier codes stop working.
func (a *api) newRecoveryCodes(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	codes, hashes := factor.NewRecoveryCodes()
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeSetRecoveryCodes, fsm.SetRecoveryCodes{UserID: id, Hashes: hashes, At: a.now(), EndSessions: a.endSessions()})); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, struct {
		Codes []string `json:"codes"`
	}{codes})
}

// factorsOut is GET /users/{id}/factors: what is enrolled, never secrets.
type factorsOut struct {
	TOTP          bool         `json:"totp"`
	RecoveryCodes int          `json:"recovery_codes_left"`
	Passkeys      []passkeyOut `json:"passkeys"`
}

type passkeyOut struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

func (a *api) getFactors(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	f, err := a.State.Factors(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	out := factorsOut{TOTP: f.TOTP != nil, RecoveryCodes: f.RecoveryLeft(), Passkeys: []passkeyOut{}}
	for _, pk := range f.Passkeys {
		po := passkeyOut{ID: base64.RawURLEncoding.EncodeToString(pk.ID), Name: pk.Name, CreatedAt: pk.CreatedAt}
		if !pk.LastUsedAt.IsZero() {
			t := pk.LastUsedAt
			po.LastUsedAt = &t
		}
		out.Passkeys = append(out.Passkeys, po)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// lockoutOut is one locked throttle key.
type lockoutOut struct {
	Key         string    `json:"key"`
	Kind        string    `json:"kind"` // password, code, ip, sms_number, sms_ip
	UserID      string    `json:"user_id,omitempty"`
	Count       int       `json:"count"`
	LockedUntil time.Time `json:"locked_until"`
}

var lockoutKinds = []struct{ prefix, kind string }{
	{factor.KeyPassword, "password"}, {factor.KeyCode, "code"}, {factor.KeyIP, "ip"},
	{factor.KeySMSTo, "sms_number"}, {factor.KeySMSIP, "sms_ip"},
}

// listLockouts is GET /lockouts: every key locked now. A lock ends by
// itself at locked_until; DELETE clears it sooner.
func (a *api) listLockouts(w http.ResponseWriter, r *http.Request) {
	ts, err := a.State.Throttles(a.now())
	if err != nil {
		a.unavailable(w, r, "read lockouts", err)
		return
	}
	out := []lockoutOut{}
	for _, t := range ts {
		l := lockoutOut{Key: t.Key, Count: t.Count, LockedUntil: t.LockedUntil, Kind: "other"}
		for _, k := range lockoutKinds {
			if rest, ok := strings.CutPrefix(t.Key, k.prefix); ok {
				l.Kind = k.kind
				if k.prefix == factor.KeyCode && !strings.HasPrefix(rest, "tel") {
					l.UserID = rest
				}
				break
			}
		}
		out = append(out, l)
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Data []lockoutOut `json:"data"`
	}{out})
}

// clearLockout is DELETE /lockouts/{key} (the key URL-escaped).
func (a *api) clearLockout(w http.ResponseWriter, r *http.Request) {
	key, err := url.PathUnescape(r.PathValue("key"))
	if err != nil || key == "" || len(key) > 256 {
		writeInvalid(w, r, []httpx.Detail{{Field: "key", Message: "must be a lockout key", Code: "invalid"}})
		return
	}
	a.clearKeys(w, r, key)
}

// clearUserLockouts is DELETE /users/{id}/lockouts: the person's password
// and code counters.
func (a *api) clearUserLockouts(w http.ResponseWriter, r *http.Request) {
	u, ok := a.pathUser(w, r)
	if !ok {
		return
	}
	keys := []string{factor.KeyCode + u.ID}
	if u.Phone != "" {
		keys = append(keys, factor.KeyCode+"tel"+u.Phone)
	}
	// The account's password counters: from every address and per address.
	prefixes := []string{factor.KeyPassword + factor.EmailSubject(u.Email)}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeThrottleClear, fsm.ThrottleClear{Keys: keys, Prefixes: prefixes})); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (a *api) clearKeys(w http.ResponseWriter, r *http.Request, keys ...string) {
	res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeThrottleClear, fsm.ThrottleClear{Keys: keys}))
	if !ok {
		return
	}
	if n, _ := res.Value.(int); n == 0 {
		if t, err := a.State.Throttle(keys[0]); err != nil || t.Count == 0 {
			notFound(w, r)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// issuerLabel is the name authenticator apps show above the account.
func (a *api) issuerLabel() string {
	if u, err := url.Parse(a.Issuer); err == nil && u.Host != "" {
		return u.Hostname()
	}
	return "oidcd"
}

// endSessions is the EndSessions of an admin's change to a credential:
// every session of the person ends, so a reset evicts an intruder.
func (a *api) endSessions() *fsm.EndSessions { return &fsm.EndSessions{At: a.now()} }
