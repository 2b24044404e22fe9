package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RevokeToken records an access token's jti as revoked until it expires.
type RevokeToken struct {
	JTI       string    `json:"jti"`
	ExpiresAt time.Time `json:"expires_at"`
}

func init() {
	register(TypeRevokeToken, applyRevokeToken)
}

func applyRevokeToken(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[RevokeToken](p)
	if !validKey(c.JTI) {
		return invalid
	}
	revoke(tx, c.JTI, c.ExpiresAt)
	return Result{}
}

func revoke(tx *bolt.Tx, jti string, exp time.Time) {
	if err := tx.Bucket(bucketRevoked).Put([]byte(jti), []byte(exp.UTC().Format(time.RFC3339))); err != nil {
		panic(err)
	}
}

// Access is what a bearer check needs about a token, read in one
// transaction: the app session, its client and the person.
type Access struct {
	App    AppSession
	Client Client
	User   User
}

// CheckAccess reports whether an access token with this jti and sid is
// still honoured at now: not revoked, app and SSO session live, client not
// suspended, organization active, membership active. The error is
// ErrNotFound, ErrSessionEnded or ErrAccessChanged (revoked counts as
// ErrSessionEnded's sibling ErrAlreadyUsed).
func (s *State) CheckAccess(jti, sid string, now time.Time) (Access, error) {
	var out Access
	var res error
	err := s.f.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketRevoked).Get([]byte(jti)) != nil {
			res = ErrAlreadyUsed
			return nil
		}
		if !get(tx, bucketApp, sid, &out.App) {
			res = ErrNotFound
			return nil
		}
		if res = checkAccess(tx, sid, out.App.UserID, out.App.OrgID, out.App.ClientID, now); res != nil {
			return nil
		}
		get(tx, bucketClients, out.App.ClientID, &out.Client)
		if !get(tx, bucketUsers, out.App.UserID, &out.User) {
			res = ErrAccessChanged
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	return out, res
}

// AccessLite is what the bearer hot path needs about a live token: the
// ids of its app session, the organization that owns the minting app, and
// the person's email when it was asked for.
type AccessLite struct {
	ClientID      string // the app that minted the token (AppSession.ClientID)
	ClientOrgID   string // the organization that owns that app (Client.OrganizationID)
	UserID        string // AppSession.UserID
	OrgID         string // AppSession.OrgID
	Email         string // User.Email; only when CheckAccessLite's email is set
	EmailVerified bool   // User.EmailVerified; likewise
}

// CheckAccessLite makes exactly the checks of CheckAccess, in the same
// order and with the same errors: not revoked, app and SSO session live,
// client not suspended, organization active, membership active, person
// exists. It is cheaper: it reads each record once, decodes only the
// fields those checks need, and decodes the person's record only when
// email is set (it always checks that the record exists).
func (s *State) CheckAccessLite(jti, sid string, now time.Time, email bool) (AccessLite, error) {
	var out AccessLite
	var res error
	err := s.f.view(func(tx *bolt.Tx) error {
		res = checkAccessLite(tx, jti, sid, now, email, &out)
		return nil
	})
	if err != nil {
		return AccessLite{}, err
	}
	return out, res
}

// checkAccessLite is CheckAccess's transaction (with checkAccess inlined)
// over the record views below. Keep the two in step:
// TestCheckAccessLiteAgreesWithCheckAccess runs both on every case.
func checkAccessLite(tx *bolt.Tx, jti, sid string, now time.Time, email bool, out *AccessLite) error {
	if tx.Bucket(bucketRevoked).Get([]byte(jti)) != nil {
		return ErrAlreadyUsed
	}
	var a appView
	if !getView(tx, bucketApp, sid, &a) {
		return ErrNotFound
	}
	if !a.EndedAt.IsZero() {
		return ErrSessionEnded
	}
	var sso ssoView
	if !getView(tx, bucketSSO, a.SSOSessionID, &sso) ||
		!(SSOSession{IdleExpiresAt: sso.IdleExpiresAt, ExpiresAt: sso.ExpiresAt, EndedAt: sso.EndedAt}).Live(now) {
		return ErrSessionEnded
	}
	var cl clientView
	if !getView(tx, bucketClients, a.ClientID, &cl) || cl.Suspended {
		return ErrAccessChanged
	}
	var o statusView
	if !getView(tx, bucketOrgs, a.OrgID, &o) || o.Status != OrgActive {
		return ErrAccessChanged
	}
	var m statusView
	mid := tx.Bucket(bucketMemberPair).Get([]byte(pairKey(a.UserID, a.OrgID)))
	if mid == nil || !getView(tx, bucketMembers, string(mid), &m) || m.Status != MembershipActive {
		return ErrAccessChanged
	}
	*out = AccessLite{ClientID: a.ClientID, ClientOrgID: cl.OrganizationID, UserID: a.UserID, OrgID: a.OrgID}
	if !email {
		if tx.Bucket(bucketUsers).Get([]byte(a.UserID)) == nil {
			return ErrAccessChanged
		}
		return nil
	}
	var u userView
	if !getView(tx, bucketUsers, a.UserID, &u) {
		return ErrAccessChanged
	}
	out.Email, out.EmailVerified = u.Email, u.EmailVerified
	return nil
}

// Revoked reports whether a jti is revoked.
func (s *State) Revoked(jti string) (bool, error) {
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = tx.Bucket(bucketRevoked).Get([]byte(jti)) != nil; return nil })
	return ok, err
}

// The views of the records that checkAccessLite decodes. Their JSON names
// are those of AppSession, SSOSession, Client, Org, Membership and User.
// Each reads its fields with a members scan (below) and falls back to
// encoding/json whenever the record is not in the plain form json.Marshal
// gives it, so the outcome is always json.Unmarshal's; the scan only
// spares the reflection and the second pass.
type (
	appView struct {
		SSOSessionID string    `json:"sso_session_id"`
		ClientID     string    `json:"client_id"`
		OrgID        string    `json:"org_id"`
		UserID       string    `json:"user_id"`
		EndedAt      time.Time `json:"ended_at"`
	}
	ssoView struct {
		IdleExpiresAt time.Time `json:"idle_expires_at"`
		ExpiresAt     time.Time `json:"expires_at"`
		EndedAt       time.Time `json:"ended_at"`
	}
	clientView struct {
		OrganizationID string `json:"organization_id"`
		Suspended      bool   `json:"suspended"`
	}
	statusView struct {
		Status string `json:"status"` // Org.Status, Membership.Status
	}
	userView struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}
	// clientAuthView is State.ClientAuth's view of a Client.
	clientAuthView struct {
		ID             string `json:"client_id"`
		Type           string `json:"type"`
		SecretHash     string `json:"secret_hash"`
		OrganizationID string `json:"organization_id"`
		Suspended      bool   `json:"suspended"`
	}
)

// view is a record view that can read itself from a members scan: member
// stores the value of one member and reports false when it cannot
// (anything but the plain form).
type view interface {
	member(key, val []byte) bool
}

// The JSON names each view reads.
var (
	appNames        = []string{"sso_session_id", "client_id", "org_id", "user_id", "ended_at"}
	ssoNames        = []string{"idle_expires_at", "expires_at", "ended_at"}
	clientNames     = []string{"organization_id", "suspended"}
	statusNames     = []string{"status"}
	userNames       = []string{"email", "email_verified"}
	clientAuthNames = []string{"client_id", "type", "secret_hash", "organization_id", "suspended"}
)

func (v *appView) member(key, val []byte) bool {
	switch string(key) {
	case "sso_session_id":
		return scanString(val, &v.SSOSessionID)
	case "client_id":
		return scanString(val, &v.ClientID)
	case "org_id":
		return scanString(val, &v.OrgID)
	case "user_id":
		return scanString(val, &v.UserID)
	case "ended_at":
		return v.EndedAt.UnmarshalJSON(val) == nil
	}
	return !foldsToAny(key, appNames)
}

func (v *ssoView) member(key, val []byte) bool {
	switch string(key) {
	case "idle_expires_at":
		return v.IdleExpiresAt.UnmarshalJSON(val) == nil
	case "expires_at":
		return v.ExpiresAt.UnmarshalJSON(val) == nil
	case "ended_at":
		return v.EndedAt.UnmarshalJSON(val) == nil
	}
	return !foldsToAny(key, ssoNames)
}

func (v *clientView) member(key, val []byte) bool {
	switch string(key) {
	case "organization_id":
		return scanString(val, &v.OrganizationID)
	case "suspended":
		return scanBool(val, &v.Suspended)
	}
	return !foldsToAny(key, clientNames)
}

func (v *statusView) member(key, val []byte) bool {
	if string(key) == "status" {
		return scanString(val, &v.Status)
	}
	return !foldsToAny(key, statusNames)
}

func (v *userView) member(key, val []byte) bool {
	switch string(key) {
	case "email":
		return scanString(val, &v.Email)
	case "email_verified":
		return scanBool(val, &v.EmailVerified)
	}
	return !foldsToAny(key, userNames)
}

func (v *clientAuthView) member(key, val []byte) bool {
	switch string(key) {
	case "client_id":
		return scanString(val, &v.ID)
	case "type":
		return scanString(val, &v.Type)
	case "secret_hash":
		return scanString(val, &v.SecretHash)
	case "organization_id":
		return scanString(val, &v.OrganizationID)
	case "suspended":
		return scanBool(val, &v.Suspended)
	}
	return !foldsToAny(key, clientAuthNames)
}

// getView is get for a view: the members scan, or encoding/json when the
// scan gives up (the view is reset first). Like get, it panics on a
// record that does not decode.
func getView[V any, PV interface {
	*V
	view
}](tx *bolt.Tx, bucket []byte, key string, v PV) bool {
	b := tx.Bucket(bucket).Get([]byte(key))
	if b == nil {
		return false
	}
	if !scanMembers(b, v) {
		*v = *new(V)
		if err := json.Unmarshal(b, v); err != nil {
			panic(fmt.Sprintf("fsm: decode record %s/%s: %v", bucket, key, err))
		}
	}
	return true
}

// scanMembers feeds the members of the JSON object b to v. It reports
// false, leaving v partly set, unless b is an object in the plain form
// json.Marshal writes (no white space) whose member names are ASCII
// without escapes and whose values all scan; any doubt leaves the work
// to encoding/json.
func scanMembers(b []byte, v view) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	i := 1
	if b[i] == '}' {
		return i == len(b)-1
	}
	for {
		// "key":
		if b[i] != '"' {
			return false
		}
		start := i + 1
		i = start
		for i < len(b) && b[i] != '"' {
			if c := b[i]; c == '\\' || c < 0x20 || c >= 0x80 {
				return false
			}
			i++
		}
		if i+1 >= len(b) || b[i+1] != ':' {
			return false
		}
		key := b[start:i]
		i += 2
		end, ok := skipValue(b, i)
		if !ok || !v.member(key, b[i:end]) {
			return false
		}
		i = end
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i == len(b)-1
		default:
			return false
		}
	}
}

// skipValue returns the end of the JSON value at b[i:] in the plain form
// (no white space), false when there is none.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		i++
		if i < len(b) && b[i] == close {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i, ok = skipString(b, i); !ok || i >= len(b) || b[i] != ':' {
					return 0, false
				}
				i++
			}
			if i, ok = skipValue(b, i); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i++
			case close:
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	default:
		return skipNumber(b, i)
	}
}

func skipLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipString returns the end of the string at b[i:], escapes checked.
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if i++; i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i < 5 {
					return 0, false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// skipNumber returns the end of the number at b[i:]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, bool) {
	digits := func() bool {
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, false
		}
	}
	return i, true
}

// scanString stores a JSON string value that needs no decoding (ASCII,
// no escapes) or null (which leaves dst, as encoding/json does).
func scanString(val []byte, dst *string) bool {
	if string(val) == "null" {
		return true
	}
	if len(val) < 2 || val[0] != '"' {
		return false
	}
	inner := val[1 : len(val)-1]
	for _, c := range inner {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	*dst = string(inner)
	return true
}

// scanBool stores a JSON true or false; null leaves dst.
func scanBool(val []byte, dst *bool) bool {
	switch string(val) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return false
	}
	return true
}

// foldsToAny reports whether key, a member name the scan did not read,
// still matches one of names the way encoding/json's case-insensitive
// matching would; then the scan gives up. key is ASCII (scanMembers sees
// to it), so ASCII case folding is all of encoding/json's folding here.
func foldsToAny(key []byte, names []string) bool {
	for _, n := range names {
		if len(key) == len(n) && asciiEqualFold(key, n) {
			return true
		}
	}
	return false
}

func asciiEqualFold(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
