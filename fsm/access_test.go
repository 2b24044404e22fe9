package fsm

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// TestCheckAccess runs the check on every way a token can stop being
// honoured, with and without the email: the error, and when the token is
// live, the facts as the whole records say them.
func TestCheckAccess(t *testing.T) {
	now := t0.Add(time.Minute)
	cases := []struct {
		name    string
		prepare func(h *harness)
		jti     string
		sid     string
		at      time.Time
		want    error
	}{
		{name: "live", at: now},
		{name: "revoked", prepare: func(h *harness) { h.mustApply(TypeRevokeToken, RevokeToken{JTI: "jti-1", ExpiresAt: now}) }, at: now, want: ErrAlreadyUsed},
		{name: "other jti revoked", prepare: func(h *harness) { h.mustApply(TypeRevokeToken, RevokeToken{JTI: "jti-2", ExpiresAt: now}) }, at: now},
		{name: "unknown app session", sid: "sid-x", at: now, want: ErrNotFound},
		{name: "sso idle expired", at: t0.Add(61 * time.Minute), want: ErrSessionEnded},
		{name: "sso just before idle expiry", at: t0.Add(time.Hour - time.Nanosecond)},
		{name: "sso max age", prepare: func(h *harness) {
			rawEdit(h, bucketSSO, "sso1", func(s *SSOSession) { s.ExpiresAt = now })
		}, at: now, want: ErrSessionEnded},
		{name: "sso just before max age", prepare: func(h *harness) {
			rawEdit(h, bucketSSO, "sso1", func(s *SSOSession) { s.ExpiresAt = now.Add(time.Nanosecond) })
		}, at: now},
		{name: "logout", prepare: func(h *harness) {
			h.mustApply(TypeEndSSOSession, EndSSOSession{ID: "sso1", At: now, Reason: EndLogout})
		}, at: now, want: ErrSessionEnded},
		{name: "sso ended, deadlines ahead", prepare: func(h *harness) {
			rawEdit(h, bucketSSO, "sso1", func(s *SSOSession) { s.EndedAt = now })
		}, at: now, want: ErrSessionEnded},
		{name: "sso record gone", prepare: func(h *harness) { rawDelete(h, bucketSSO, "sso1") }, at: now, want: ErrSessionEnded},
		{name: "app session ended alone", prepare: func(h *harness) {
			rawEdit(h, bucketApp, "sid-1", func(a *AppSession) { a.EndedAt = now })
		}, at: now, want: ErrSessionEnded},
		{name: "superseded", prepare: func(h *harness) {
			h.mustApply(TypeStartSSOSession, StartSSOSession{TokenHash: "tok2", Supersedes: "sso1", Session: SSOSession{
				ID: "sso2", UserID: userA, CreatedAt: now, IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}})
		}, at: now, want: ErrSessionEnded},
		{name: "client suspended", prepare: func(h *harness) {
			c, _ := h.f.State().Client("app")
			c.Suspended = true
			h.mustApply(TypeUpdateClient, PutClient{Client: c})
		}, at: now, want: ErrAccessChanged},
		{name: "client deleted", prepare: func(h *harness) { h.mustApply(TypeDeleteClient, DeleteClient{ID: "app"}) }, at: now, want: ErrAccessChanged},
		{name: "org deleted", prepare: func(h *harness) { h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgA, At: now}) }, at: now, want: ErrSessionEnded},
		{name: "org record gone", prepare: func(h *harness) { rawDelete(h, bucketOrgs, orgA) }, at: now, want: ErrAccessChanged},
		{name: "membership suspended", prepare: func(h *harness) {
			h.mustApply(TypeUpdateMembership, UpdateMembership{ID: memA, Status: MembershipSuspended})
		}, at: now, want: ErrAccessChanged},
		{name: "membership removed", prepare: func(h *harness) { h.mustApply(TypeDeleteMembership, DeleteMembership{ID: memA}) }, at: now, want: ErrAccessChanged},
		{name: "user erased", prepare: func(h *harness) { h.mustApply(TypeDeleteUser, DeleteUser{ID: userA, At: now}) }, at: now, want: ErrSessionEnded},
		{name: "user record gone", prepare: func(h *harness) { rawDelete(h, bucketUsers, userA) }, at: now, want: ErrAccessChanged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := signedIn(t)
			issue(h, "c1", orgA, "sid-1", t0)
			redeem(h, "c1", "app", "jti-1", t0.Add(time.Second))
			// Checked once before the change, so that what the check read
			// then is in the access cache: the change must still show.
			for _, email := range []bool{false, true} {
				if _, err := h.f.State().CheckAccess("jti-1", "sid-1", t0.Add(30*time.Second), email); err != nil {
					t.Fatalf("before the change: %v", err)
				}
			}
			if c.prepare != nil {
				c.prepare(h)
			}
			jti, sid := "jti-1", "sid-1"
			if c.jti != "" {
				jti = c.jti
			}
			if c.sid != "" {
				sid = c.sid
			}
			for _, email := range []bool{false, true} {
				acc, err := h.f.State().CheckAccess(jti, sid, c.at, email)
				if !errors.Is(err, c.want) {
					t.Fatalf("CheckAccess(email %v): got %v, want %v", email, err, c.want)
				}
				if err != nil {
					continue
				}
				if want := wholeRecordAccess(t, h, sid, email); acc != want {
					t.Fatalf("CheckAccess(email %v): got %+v, want %+v", email, acc, want)
				}
			}
		})
	}
}

// TestCheckAccessEmail: the email comes from the person's record as it is
// now.
func TestCheckAccessEmail(t *testing.T) {
	h := signedIn(t)
	issue(h, "c1", orgA, "sid-1", t0)
	redeem(h, "c1", "app", "jti-1", t0.Add(time.Second))
	if _, err := h.f.State().CheckAccess("jti-1", "sid-1", t0.Add(time.Minute), true); err != nil {
		t.Fatal(err) // the old address, now in the access cache
	}
	verified, addr := true, "ann@new.example"
	h.mustApply(TypeUpdateUser, UpdateUser{ID: userA, Email: &addr, EmailVerified: &verified, At: t0})
	acc, err := h.f.State().CheckAccess("jti-1", "sid-1", t0.Add(time.Minute), true)
	if err != nil {
		t.Fatal(err)
	}
	want := Access{ClientID: "app", ClientOrgID: orgA, UserID: userA, OrgID: orgA, Email: addr, EmailVerified: true}
	if acc != want {
		t.Fatalf("got %+v, want %+v", acc, want)
	}
}

// wholeRecordAccess is what CheckAccess should say of a live token, read
// from the whole records through the State's getters, not the views.
func wholeRecordAccess(t *testing.T, h *harness, sid string, email bool) Access {
	t.Helper()
	s := h.f.State()
	a, err := s.AppSession(sid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Client(a.ClientID)
	if err != nil {
		t.Fatal(err)
	}
	want := Access{ClientID: a.ClientID, ClientOrgID: c.OrganizationID, UserID: a.UserID, OrgID: a.OrgID}
	if email {
		u, err := s.User(a.UserID)
		if err != nil {
			t.Fatal(err)
		}
		want.Email, want.EmailVerified = u.Email, u.EmailVerified
	}
	return want
}

// rawEdit changes a record behind the commands' back (see rawDelete).
func rawEdit[T any](h *harness, bucket []byte, key string, edit func(*T)) {
	h.t.Helper()
	if err := h.f.db.Update(func(tx *bolt.Tx) error {
		var v T
		if !get(tx, bucket, key, &v) {
			return ErrNotFound
		}
		edit(&v)
		put(tx, bucket, key, v)
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
}

// rawDelete removes a record behind the commands' back: states that no
// command produces, to reach the checks that guard against them.
func rawDelete(h *harness, bucket []byte, key string) {
	h.t.Helper()
	if err := h.f.db.Update(func(tx *bolt.Tx) error { del(tx, bucket, key); return nil }); err != nil {
		h.t.Fatal(err)
	}
}

// BenchmarkCheckAccess is the bearer paths' check, with and without the
// person's email.
func BenchmarkCheckAccess(b *testing.B) {
	f, err := Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	var index uint64
	apply := func(typ Type, v any) {
		index++
		if r := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(typ, v).Encode()}).(Result); r.Err != nil {
			b.Fatalf("%s: %v", typ, r.Err)
		}
	}
	apply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0})
	apply(TypeCreateUser, CreateUser{User: User{ID: userA, Email: "ann@example.com", EmailVerified: true,
		PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g", CreatedAt: t0, UpdatedAt: t0}})
	apply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: memA, UserID: userA, OrgID: orgA, Status: MembershipActive, CreatedAt: t0, UpdatedAt: t0}})
	apply(TypeCreateClient, PutClient{Create: true, Client: Client{ID: "app", Name: "App", Type: ClientConfidential,
		SecretHash: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8", OrganizationID: orgA,
		RedirectURIs: []string{"https://app.example/cb", "http://127.0.0.1:9999/cb"}, Scopes: []string{"openid", "email", "profile"},
		AccessTokenTTL: 600, CreatedAt: t0, UpdatedAt: t0}})
	apply(TypeStartSSOSession, StartSSOSession{TokenHash: "tok1", Session: SSOSession{
		ID: "sso1", UserID: userA, AuthTime: t0, AMR: []string{"pwd"}, ACR: "urn:service:sso:acr:pwd",
		CreatedAt: t0, LastSeen: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(8 * time.Hour)}})
	apply(TypeIssueCode, IssueCode{NewSID: "sid-1", IdleExpiresAt: t0.Add(time.Hour), Code: Code{
		Hash: "c1", ClientID: "app", UserID: userA, OrgID: orgA, SSOSessionID: "sso1", IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}})
	apply(TypeRedeemCode, RedeemCode{Hash: "c1", ClientID: "app", At: t0, AccessJTI: "jti-1", AccessExpires: t0.Add(10 * time.Minute)})
	s, now := f.State(), t0.Add(time.Minute)
	for _, email := range []bool{false, true} {
		name := "lite"
		if email {
			name = "lite+email"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.CheckAccess("jti-1", "sid-1", now, email); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
