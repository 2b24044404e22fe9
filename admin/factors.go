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
	Kind        string    `json:"kind"`              // password, code, ip, sms_number, sms_ip
	UserID      string    `json:"user_id,omitempty"` // the person the key names, when known
	Count       int       `json:"count"`
	LockedUntil time.Time `json:"locked_until"`
}

var lockoutKinds = []struct{ prefix, kind string }{
	{factor.KeyPassword, "password"}, {factor.KeyCode, "code"}, {factor.KeyIP, "ip"},
	{factor.KeySMSTo, "sms_number"}, {factor.KeySMSIP, "sms_ip"},
}

// listLockouts is GET /lockouts: every key locked now, with the person it
// names when that person is known (user_id): a person's code counter
// names their id, a text-message code or number their phone, a password
// counter the hash of the address typed (factor.EmailSubject), which is
// matched against every person's address (lockoutPeople). A lock ends by
// itself at locked_until; DELETE clears it sooner.
func (a *api) listLockouts(w http.ResponseWriter, r *http.Request) {
	ts, err := a.State.Throttles(a.now())
	if err != nil {
		a.unavailable(w, r, "read lockouts", err)
		return
	}
	out := []lockoutOut{}
	subjects := map[string][]int{} // a password counter's address hash: its rows
	for _, t := range ts {
		l := lockoutOut{Key: t.Key, Count: t.Count, LockedUntil: t.LockedUntil, Kind: "other"}
		for _, k := range lockoutKinds {
			rest, ok := strings.CutPrefix(t.Key, k.prefix)
			if !ok {
				continue
			}
			l.Kind = k.kind
			switch {
			case k.prefix == factor.KeyCode && strings.HasPrefix(rest, "tel"):
				l.UserID = a.phoneUser(strings.TrimPrefix(rest, "tel"))
			case k.prefix == factor.KeySMSTo:
				l.UserID = a.phoneUser(rest)
			case k.prefix == factor.KeyCode:
				l.UserID = rest
			case k.prefix == factor.KeyPassword:
				subject, _, _ := strings.Cut(rest, "@") // per account, or per account and address
				subjects[subject] = append(subjects[subject], len(out))
			}
			break
		}
		out = append(out, l)
	}
	if err := a.lockoutPeople(out, subjects); err != nil {
		a.unavailable(w, r, "read lockouts", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Data []lockoutOut `json:"data"`
	}{out})
}

// phoneUser is the id of the person with the phone number, "" for none.
func (a *api) phoneUser(phone string) string {
	if u, err := a.State.UserByPhone(phone); err == nil {
		return u.ID
	}
	return ""
}

// lockoutPeople names the person of each password counter in subjects
// (the rows of out by address hash) whose address is a person's: one
// scan of the address index, which ends once every hash is found, and
// none when there is no password counter.
func (a *api) lockoutPeople(out []lockoutOut, subjects map[string][]int) error {
	left := len(subjects)
	if left == 0 {
		return nil
	}
	return a.State.EmailIndex(func(email, id string) bool {
		if rows, ok := subjects[factor.EmailSubject(email)]; ok {
			for _, i := range rows {
				out[i].UserID = id
			}
			left--
		}
		return left > 0
	})
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
