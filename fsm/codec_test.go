package fsm

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sampleRecords are records of every stored type with every field set,
// times in several zones, and empty as well as nil lists.
func sampleRecords() []any {
	later := t0.Add(90*time.Minute + 7*time.Nanosecond).In(time.FixedZone("x", 3600))
	west := t0.Add(time.Hour).In(time.FixedZone("w", -7*3600-1800))
	return []any{
		&Org{ID: orgA, Slug: "alpha", Name: "Älpha <&>", Status: OrgDeleted, CreatedAt: t0, DeletedAt: later},
		&User{ID: userA, Email: "ännä+<x>@example.com", EmailVerified: true, PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$x$y", Phone: "+15550001", CreatedAt: t0, UpdatedAt: west},
		&Membership{ID: memA, UserID: userA, OrgID: orgA, Status: MembershipSuspended, CreatedAt: t0, UpdatedAt: later},
		&Client{ID: "app", Name: "App", Type: ClientConfidential, SecretHash: "h", RedirectURIs: []string{"https://a/cb?x=1&y=\"2\""}, Scopes: []string{},
			OrganizationID: orgA, MultiOrganization: true, Organizations: []string{orgA, orgB}, AccessTokenTTL: 600, BackchannelLogoutURI: "https://a/bc",
			SkipConsent: true, Suspended: true, CreatedAt: t0, UpdatedAt: later},
		&Client{ID: "pub", Type: ClientPublic, CreatedAt: t0},
		&Key{Kid: "k1", Private: []byte{0, 1, 2, 0xff}, CreatedAt: t0, ActivatesAt: later},
		&SSOSession{ID: "sso1", UserID: userA, AuthTime: t0, AMR: []string{"pwd", "otp"}, ACR: "mfa", CreatedAt: t0, LastSeen: west,
			IdleExpiresAt: later, ExpiresAt: later.Add(time.Nanosecond), Verified: map[string]time.Time{"pwd": t0, "otp": west}, EndedAt: later},
		&AppSession{ID: "sid-1", SSOSessionID: "sso1", ClientID: "app", OrgID: orgA, UserID: userA, CreatedAt: t0, EndedAt: later, EndReason: EndLogout},
		&Delivery{ID: "d1", LogoutIndex: 1 << 40, ClientID: "app", URI: "https://a/bc", Sub: userA, OrgID: orgA, SID: "sid-1", Cause: EndLogout,
			CreatedAt: t0, State: "pending", Attempts: 3, NextAttemptAt: later, LastError: "dial: refused", DoneAt: west},
		&Code{Hash: "c1", ClientID: "app", RedirectURI: "https://a/cb", UserID: userA, OrgID: orgA, SID: "sid-1", SSOSessionID: "sso1", Scopes: []string{"openid"},
			Nonce: "n", Challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", AuthTime: t0, AMR: []string{"pwd"}, ACR: "pwd", RequestedAt: t0,
			IssuedAt: t0, ExpiresAt: later, RedeemedAt: later, AccessJTI: "jti-1", AccessExpires: later},
		&Consent{UserID: userA, ClientID: "app", Scopes: []string{"openid", "profile"}, At: west},
		&Factors{UserID: userA, TOTP: &TOTP{Secret: []byte("sealed"), LastStep: 58_000_000, CreatedAt: t0},
			Recovery: []RecoveryCode{{Hash: "r1"}, {Hash: "r2", UsedAt: later}},
			Passkeys: []Passkey{{ID: []byte{1, 2, 3}, Name: "Key ä", Credential: json.RawMessage(`{"id":"AQID","n":1}`), SignCount: 1<<32 - 1, CreatedAt: t0, LastUsedAt: later}}},
		&Challenge{ID: "ch", UserID: userA, Purpose: "assert", Data: json.RawMessage(`{"challenge":"abc","allow":[1,2]}`), ExpiresAt: later},
		&SMSCode{ID: "s1", UserID: userA, Phone: "+15550001", Hash: "hh", Attempts: 4, ExpiresAt: later},
		&Throttle{Key: "pw/" + userA, Count: 9, WindowStart: t0, LockedUntil: west, ExpiresAt: later},
		&Org{ID: orgB, Slug: "beta", Name: "Beta", Status: OrgActive, CreatedAt: t0,
			Registration: &Registration{Enabled: true, EmailDomains: []string{"example.org", "xn--bcher-kva.example"}}},
		&Org{ID: orgB, Slug: "beta", Name: "Beta", Status: OrgActive, CreatedAt: t0, Registration: &Registration{EmailDomains: []string{}}},
		&Email{ID: "00000000000000000100-0001", To: "ännä+<x>@example.com", Kind: EmailVerify, Locale: "de-CH", UserID: userA, Body: []byte{0, 1, 0xff},
			CreatedAt: t0, State: EmailFailed, Attempts: 7, NextAttemptAt: later, LastError: "550 5.1.1 unbekannt", DoneAt: west},
		&Link{Hash: strings.Repeat("ab", 32), Purpose: LinkRegistration, UserID: userA, Email: "zed@example.org", OrgID: orgA, InvitationID: "inv",
			Continue: "sealed.request", CreatedAt: t0, ExpiresAt: later},
		&Invitation{ID: "inv", Email: "new@example.com", OrgID: orgA, LinkHash: strings.Repeat("cd", 32), CreatedAt: t0, ExpiresAt: later,
			AcceptedAt: west, AcceptedBy: userA},
	}
}

// TestRecordCodecRoundTrip: every record reads back as the value written,
// to the nanosecond and the zone offset, as encoding/json would have read
// it.
func TestRecordCodecRoundTrip(t *testing.T) {
	for _, rec := range sampleRecords() {
		name := reflect.TypeOf(rec).Elem().Name()
		t.Run(name, func(t *testing.T) {
			b, err := encodeRecord(rec)
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
			if err := decodeRecord(b, got); err != nil {
				t.Fatal(err)
			}
			if g, w := mustJSON(t, got), mustJSON(t, rec); g != w {
				t.Fatalf("round trip:\ngot  %s\nwant %s", g, w)
			}
			// The JSON text round trip is the old store's behaviour.
			viaJSON := reflect.New(reflect.TypeOf(rec).Elem()).Interface()
			if err := json.Unmarshal([]byte(mustJSON(t, rec)), viaJSON); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normTimes(got), normTimes(viaJSON)) {
				t.Fatalf("differs from encoding/json's reading:\ngot  %#v\nwant %#v", got, viaJSON)
			}
			t.Logf("%s: %d bytes, %d as JSON", name, len(b), len(mustJSON(t, rec)))
		})
	}
}

// normTimes is v as JSON text re-read, so that time.Time values that are
// the same instant in the same zone offset compare equal whatever their
// *time.Location.
func normTimes(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestViewsMatchTheirRecords: every field of a view is a field of the
// record it reads, under the same name, CBOR key and type, so a view never
// silently reads a zero value for a renamed field.
func TestViewsMatchTheirRecords(t *testing.T) {
	cases := []struct {
		view   any
		record []any
	}{
		{appView{}, []any{AppSession{}}},
		{ssoView{}, []any{SSOSession{}}},
		{clientView{}, []any{Client{}}},
		{clientAuthView{}, []any{Client{}}},
		{statusView{}, []any{Org{}, Membership{}}},
		{userView{}, []any{User{}}},
	}
	for _, c := range cases {
		vt := reflect.TypeOf(c.view)
		for _, rec := range c.record {
			rt := reflect.TypeOf(rec)
			fields := map[string]reflect.StructField{}
			for i := range rt.NumField() {
				fields[jsonName(rt.Field(i))] = rt.Field(i)
			}
			for i := range vt.NumField() {
				f := vt.Field(i)
				rf, ok := fields[jsonName(f)]
				if !ok || rf.Type != f.Type || cborKey(rf) != cborKey(f) {
					t.Errorf("%s.%s (%q, key %s, %s): %s has no such field (%q, key %s, %v)", vt.Name(), f.Name, jsonName(f), cborKey(f), f.Type,
						rt.Name(), jsonName(rf), cborKey(rf), rf.Type)
				}
			}
		}
	}
}

// TestRecordFieldsHaveKeys: every field of a stored record, nested ones
// included, has its own small integer CBOR key (keyasint), so records stay
// small and a view skips the fields it does not read without allocating.
// A key is never reused: a new field takes the next number.
func TestRecordFieldsHaveKeys(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var check func(rt reflect.Type)
	check = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || rt.PkgPath() != reflect.TypeOf(Org{}).PkgPath() || seen[rt] {
			return
		}
		seen[rt] = true
		keys := map[string]string{}
		for i := range rt.NumField() {
			f := rt.Field(i)
			tag := f.Tag.Get("cbor")
			k := cborKey(f)
			n, err := strconv.Atoi(k)
			if !strings.Contains(tag, ",keyasint") || err != nil || n < 1 || n > 23 {
				t.Errorf("%s.%s: cbor tag %q, want a key from 1 to 23 (one byte) with keyasint", rt.Name(), f.Name, tag)
			}
			if other, dup := keys[k]; dup {
				t.Errorf("%s.%s: key %s already taken by %s", rt.Name(), f.Name, k, other)
			}
			keys[k] = f.Name
			if _, jopts, _ := strings.Cut(f.Tag.Get("json"), ","); jopts != "" && !strings.HasSuffix(tag, ","+jopts) {
				t.Errorf("%s.%s: cbor tag %q does not carry the json options %q", rt.Name(), f.Name, tag, jopts)
			}
			check(f.Type)
		}
	}
	for _, rb := range recordBuckets() {
		check(reflect.TypeOf(rb.newRec()))
	}
	check(reflect.TypeOf(Event{}))          // the audit trail, newer than schema 1
	if len(seen) < len(recordBuckets())+4 { // and TOTP, RecoveryCode, Passkey, Event
		t.Fatalf("checked %d record types", len(seen))
	}
}

func cborKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("cbor"), ",")
	return k
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// TestViewsDecodeTheirFields: a view decoded from a whole record carries
// the record's values.
func TestViewsDecodeTheirFields(t *testing.T) {
	recs := sampleRecords()
	find := func(typ any) []byte {
		for _, r := range recs {
			if reflect.TypeOf(r).Elem() == reflect.TypeOf(typ) {
				b, err := encodeRecord(r)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		t.Fatalf("no sample %T", typ)
		return nil
	}
	var a appView
	var s ssoView
	var c clientAuthView
	var u userView
	var st statusView
	for _, d := range []struct {
		b []byte
		v any
	}{{find(AppSession{}), &a}, {find(SSOSession{}), &s}, {find(Client{}), &c}, {find(User{}), &u}, {find(Membership{}), &st}} {
		if err := decodeRecord(d.b, d.v); err != nil {
			t.Fatalf("%T: %v", d.v, err)
		}
	}
	if a.SSOSessionID != "sso1" || a.ClientID != "app" || a.OrgID != orgA || a.UserID != userA || a.EndedAt.IsZero() {
		t.Errorf("appView: %+v", a)
	}
	if s.IdleExpiresAt.IsZero() || !s.ExpiresAt.Equal(s.IdleExpiresAt.Add(time.Nanosecond)) || s.EndedAt.IsZero() {
		t.Errorf("ssoView: %+v", s)
	}
	if c.ID != "app" || c.Type != ClientConfidential || c.SecretHash != "h" || c.OrganizationID != orgA || !c.Suspended {
		t.Errorf("clientAuthView: %+v", c)
	}
	if u.Email != "ännä+<x>@example.com" || !u.EmailVerified {
		t.Errorf("userView: %+v", u)
	}
	if st.Status != MembershipSuspended {
		t.Errorf("statusView: %+v", st)
	}
}

// FuzzDecodeRecord: no input makes the record decoder panic or allocate
// without bound, and what it reads re-encodes to a record that reads back
// the same.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, err := encodeRecord(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // an array of 2^64-1 elements
	f.Add([]byte{0xbf, 0x61, 0x61})                                     // an unterminated map
	f.Fuzz(func(t *testing.T, b []byte) {
		targets := []func() any{
			func() any { return new(appView) }, func() any { return new(ssoView) }, func() any { return new(clientView) },
			func() any { return new(clientAuthView) }, func() any { return new(statusView) }, func() any { return new(userView) },
		}
		for _, rb := range recordBuckets() {
			targets = append(targets, rb.newRec)
		}
		for _, newV := range targets {
			v := newV()
			if decodeRecord(b, v) != nil {
				continue
			}
			again, err := encodeRecord(v)
			if err != nil {
				t.Fatalf("%T read from %x does not encode: %v", v, b, err)
			}
			w := newV()
			if err := decodeRecord(again, w); err != nil {
				t.Fatalf("%T re-encoded as %x does not decode: %v", v, again, err)
			}
			if normTimes(v) != normTimes(w) {
				t.Fatalf("%T: %s, then %s", v, normTimes(v), normTimes(w))
			}
		}
	})
}
