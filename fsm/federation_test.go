package fsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const (
	idpSite = "00000000-0000-4000-8000-0000000001d1" // the site's provider, example.com authoritative
	idpOrgA = "00000000-0000-4000-8000-0000000001d2" // org A's own provider, example.com authoritative
)

// withProviders seeds the world and registers two providers: the site's
// (create_or_link, example.com) and org A's (create_or_link,
// example.com, memberships in A and group "beta" → B).
func withProviders(t *testing.T) *harness {
	h := newHarness(t)
	seed(h)
	h.mustApply(TypePutIdentityProvider, PutIdentityProvider{Create: true, Provider: IdentityProvider{
		ID: idpSite, Slug: "corp", DisplayName: "Corp", Issuer: "https://corp.example", ClientID: "oidcd", ClientSecret: []byte("sealed"),
		Scopes: []string{"openid"}, EmailDomains: []string{"Example.com"}, Provisioning: ProvisionCreateOrLink, Enabled: true, CreatedAt: t0}})
	h.mustApply(TypePutIdentityProvider, PutIdentityProvider{Create: true, Provider: IdentityProvider{
		ID: idpOrgA, Slug: "alpha-idp", DisplayName: "Alpha", Issuer: "https://alpha.example", ClientID: "oidcd",
		OrgID: orgA, EmailDomains: []string{"example.com"}, Provisioning: ProvisionCreateOrLink, Enabled: true,
		Memberships: ProviderMemberships{GroupsClaim: "groups", GroupOrgs: map[string]string{"beta": orgB}}, CreatedAt: t0}})
	return h
}

func fedSignIn(provider, subject, email string, verified bool, n int) FederatedSignIn {
	return FederatedSignIn{ProviderID: provider, Subject: subject, Email: email, EmailVerified: verified,
		IdentityID: importID(900 + n), UserID: importID(800 + n), At: t0.Add(time.Duration(n) * time.Minute)}
}

func fedSession(id string, at time.Time) *StartSSOSession {
	return &StartSSOSession{TokenHash: "tok-" + id, Session: SSOSession{ID: id, AuthTime: at, AMR: []string{"pwd"}, ACR: "pwd",
		CreatedAt: at, LastSeen: at, IdleExpiresAt: at.Add(time.Hour), ExpiresAt: at.Add(8 * time.Hour), UpstreamSID: "up-" + id}}
}

func refusal(err error) string {
	var fe *FederationRefusedError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

func TestPutIdentityProvider(t *testing.T) {
	h := withProviders(t)
	cases := []struct {
		name string
		put  PutIdentityProvider
		want error
	}{
		{"create twice", PutIdentityProvider{Create: true, Provider: IdentityProvider{ID: idpSite, Slug: "x", Issuer: "i", ClientID: "c", Provisioning: ProvisionOff}}, ErrConflict},
		{"slug taken", PutIdentityProvider{Create: true, Provider: IdentityProvider{ID: importID(1), Slug: "corp", Issuer: "i", ClientID: "c", Provisioning: ProvisionOff}}, ErrConflict},
		{"replace a missing one", PutIdentityProvider{Provider: IdentityProvider{ID: importID(1), Slug: "y", Issuer: "i", ClientID: "c", Provisioning: ProvisionOff}}, ErrNotFound},
		{"unknown organization", PutIdentityProvider{Create: true, Provider: IdentityProvider{ID: importID(1), Slug: "y", Issuer: "i", ClientID: "c", Provisioning: ProvisionOff, OrgID: importID(2)}}, ErrNotFound},
		{"unknown group organization", PutIdentityProvider{Create: true, Provider: IdentityProvider{ID: importID(1), Slug: "y", Issuer: "i", ClientID: "c", Provisioning: ProvisionOff,
			Memberships: ProviderMemberships{GroupOrgs: map[string]string{"g": importID(2)}}}}, ErrNotFound},
		{"unknown provisioning", PutIdentityProvider{Create: true, Provider: IdentityProvider{ID: importID(1), Slug: "y", Issuer: "i", ClientID: "c", Provisioning: "maybe"}}, ErrInvalid},
		{"update of a version since changed", PutIdentityProvider{ExpectUpdatedAt: t0.Add(time.Minute), Provider: IdentityProvider{ID: idpSite, Slug: "corp", Issuer: "https://corp.example", ClientID: "oidcd", Provisioning: ProvisionOff}}, ErrConflict},
		{"slug with a slash", PutIdentityProvider{Create: true, Provider: IdentityProvider{ID: importID(1), Slug: "a/b", Issuer: "i", ClientID: "c", Provisioning: ProvisionOff}}, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := h.apply(TypePutIdentityProvider, c.put); !errors.Is(r.Err, c.want) {
				t.Fatalf("got %v, want %v", r.Err, c.want)
			}
		})
	}
	// A replace keeps the stored secret and creation time, and moves the
	// slug.
	h.mustApply(TypePutIdentityProvider, PutIdentityProvider{Provider: IdentityProvider{ID: idpSite, Slug: "corp2", DisplayName: "Corp 2",
		Issuer: "https://corp.example", ClientID: "oidcd", Provisioning: ProvisionCreate, Enabled: true, CreatedAt: t0.Add(time.Hour)}})
	ip, err := h.f.State().IdentityProviderBySlug("corp2")
	if err != nil || ip.ID != idpSite || string(ip.ClientSecret) != "sealed" || !ip.CreatedAt.Equal(t0) {
		t.Fatalf("replaced: %+v, %v", ip, err)
	}
	if _, err := h.f.State().IdentityProviderBySlug("corp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old slug still finds a provider: %v", err)
	}
}

// TestFederatedProvisioning: who a first sign-in through a provider is,
// case by case. The cases an attacker who controls an upstream (or an
// account at one) would try are here: claiming another person's address
// unverified, outside the provider's domains, or, through an
// organization's provider, an address of a person who belongs to another
// organization or administers the site.
func TestFederatedProvisioning(t *testing.T) {
	type world func(h *harness)
	nothing := func(*harness) {}
	provisioning := func(id, mode string) world {
		return func(h *harness) {
			ip, _ := h.f.State().IdentityProvider(id)
			ip.Provisioning = mode
			h.mustApply(TypePutIdentityProvider, PutIdentityProvider{Provider: ip})
		}
	}
	cases := []struct {
		name    string
		world   world
		signIn  FederatedSignIn
		refused string // "" when it goes through
		user    string // the person it signs in ("new": a created one)
		created bool
	}{
		{"new address is created", nothing, fedSignIn(idpSite, "s-1", "carol@example.com", true, 1), "", "new", true},
		{"bob's address, verified, in the domain: linked", nothing, fedSignIn(idpSite, "s-2", "BOB@example.com", true, 2), "", userB, false},
		{"bob's address unverified: refused", nothing, fedSignIn(idpSite, "s-3", "bob@example.com", false, 3), RefusedAddressTaken, "", false},
		{"an address outside the domains is never linked", func(h *harness) {
			h.mustApply(TypeCreateUser, CreateUser{User: User{ID: importID(50), Email: "dan@other.org", CreatedAt: t0}})
		}, fedSignIn(idpSite, "s-4", "dan@other.org", true, 4), RefusedAddressTaken, "", false},
		{"a subdomain is not its parent", func(h *harness) {
			h.mustApply(TypeCreateUser, CreateUser{User: User{ID: importID(51), Email: "eve@evil.example.com", CreatedAt: t0}})
		}, fedSignIn(idpSite, "s-5", "eve@evil.example.com", true, 5), RefusedAddressTaken, "", false},
		{"create only: a taken address is refused", provisioning(idpSite, ProvisionCreate), fedSignIn(idpSite, "s-6", "bob@example.com", true, 6), RefusedAddressTaken, "", false},
		{"link only: no account", provisioning(idpSite, ProvisionLink), fedSignIn(idpSite, "s-7", "new@example.com", true, 7), RefusedNoAccount, "", false},
		{"link only: bob", provisioning(idpSite, ProvisionLink), fedSignIn(idpSite, "s-8", "bob@example.com", true, 8), "", userB, false},
		{"off: nobody new", provisioning(idpSite, ProvisionOff), fedSignIn(idpSite, "s-9", "new@example.com", true, 9), RefusedProvisioningOff, "", false},
		{"no address", nothing, fedSignIn(idpSite, "s-10", "", true, 10), RefusedNoAddress, "", false},
		// Org A's provider: Ann is a member of A only, so she may be
		// linked; Bob with a membership of B may not, nor may a site
		// administrator of no organization.
		{"org provider links a person wholly its own", nothing, fedSignIn(idpOrgA, "a-1", "ann@example.com", true, 11), "", userA, false},
		{"org provider cannot take a person of another organization", func(h *harness) {
			h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: importID(60), UserID: userB, OrgID: orgB, Status: MembershipActive}})
		}, fedSignIn(idpOrgA, "a-2", "bob@example.com", true, 12), RefusedAddressTaken, "", false},
		{"org provider cannot take a site administrator", func(h *harness) {
			h.mustApply(TypeCreateAdminGrant, CreateAdminGrant{Grant: AdminGrant{ID: importID(61), UserID: userB, Role: RoleAdmin, CreatedAt: t0}})
		}, fedSignIn(idpOrgA, "a-3", "bob@example.com", true, 13), RefusedAddressTaken, "", false},
		{"org provider links its own org_admin", func(h *harness) {
			h.mustApply(TypeCreateAdminGrant, CreateAdminGrant{Grant: AdminGrant{ID: importID(62), UserID: userA, Role: RoleOrgAdmin, OrgID: orgA, CreatedAt: t0}})
		}, fedSignIn(idpOrgA, "a-4", "ann@example.com", true, 14), "", userA, false},
		{"disabled provider", func(h *harness) {
			ip, _ := h.f.State().IdentityProvider(idpSite)
			ip.Enabled = false
			h.mustApply(TypePutIdentityProvider, PutIdentityProvider{Provider: ip})
		}, fedSignIn(idpSite, "s-15", "carol@example.com", true, 15), RefusedDisabled, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := withProviders(t)
			c.world(h)
			before := mustDigest(t, h)
			r := h.apply(TypeFederatedSignIn, c.signIn)
			if got := refusal(r.Err); got != c.refused {
				t.Fatalf("refusal: got %q, want %q", got, c.refused)
			}
			if c.refused != "" {
				if after := mustDigest(t, h); after != before {
					t.Fatal("a refused sign-in wrote something")
				}
				return
			}
			res := r.Value.(FederatedSignInResult)
			want := c.user
			if want == "new" {
				want = c.signIn.UserID
			}
			if res.User.ID != want || res.Created != c.created || !res.Linked {
				t.Fatalf("got %+v, want person %s created %v", res, want, c.created)
			}
			if idn, err := h.f.State().IdentityBySubject(c.signIn.ProviderID, c.signIn.Subject); err != nil || idn.UserID != want {
				t.Fatalf("link: %+v, %v", idn, err)
			}
		})
	}
}

// TestFederatedEmailVerified: a created person's address is verified only
// when the upstream says so for an address of the provider's domains.
func TestFederatedEmailVerified(t *testing.T) {
	for _, c := range []struct {
		email    string
		verified bool
		want     bool
	}{{"a@example.com", true, true}, {"b@example.com", false, false}, {"c@elsewhere.org", true, false}} {
		h := withProviders(t)
		res := h.mustApply(TypeFederatedSignIn, fedSignIn(idpSite, "v", c.email, c.verified, 1)).Value.(FederatedSignInResult)
		if res.User.EmailVerified != c.want {
			t.Errorf("%s verified=%v: stored %v, want %v", c.email, c.verified, res.User.EmailVerified, c.want)
		}
	}
}

// TestFederatedSignInFindsTheLinkNotTheAddress: once linked, the person is
// the link's whatever address the upstream sends later, and another
// subject with the same address is someone else's problem, not a way in.
func TestFederatedSignInFindsTheLinkNotTheAddress(t *testing.T) {
	h := withProviders(t)
	first := h.mustApply(TypeFederatedSignIn, fedSignIn(idpSite, "s-1", "carol@example.com", true, 1)).Value.(FederatedSignInResult)
	again := fedSignIn(idpSite, "s-1", "carol.new@example.com", true, 2)
	res := h.mustApply(TypeFederatedSignIn, again).Value.(FederatedSignInResult)
	if res.User.ID != first.User.ID || res.Created || res.Linked || res.Identity.Email != "carol.new@example.com" {
		t.Fatalf("second sign-in: %+v", res)
	}
	// A second subject claiming carol's address is linked only as the
	// rules allow: verified, in the domain, and carol has no link there
	// yet. She has: refused.
	r := h.apply(TypeFederatedSignIn, fedSignIn(idpSite, "s-other", "carol@example.com", true, 3))
	if got := refusal(r.Err); got != RefusedLinkedElsewhere {
		t.Fatalf("a second subject for a linked person: %q", got)
	}
}

func TestFederatedMemberships(t *testing.T) {
	h := withProviders(t)
	in := fedSignIn(idpOrgA, "m-1", "mia@example.com", true, 1)
	in.OrgIDs, in.MembershipIDs = []string{orgA, orgB}, []string{importID(70), importID(71)}
	mia := h.mustApply(TypeFederatedSignIn, in).Value.(FederatedSignInResult).User.ID
	status := func() map[string]string {
		ms, err := h.f.State().MembershipsOfUser(mia)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range ms {
			out[m.OrgID] = m.Status
			if m.ProviderID != idpOrgA {
				out[m.OrgID] += "(not the provider's)"
			}
		}
		return out
	}
	if got := status(); got[orgA] != MembershipActive || got[orgB] != MembershipActive {
		t.Fatalf("first sign-in: %v", got)
	}
	// The group is gone: B's membership is suspended, A's kept.
	in = fedSignIn(idpOrgA, "m-1", "mia@example.com", true, 2)
	in.OrgIDs, in.MembershipIDs = []string{orgA}, []string{importID(72)}
	h.mustApply(TypeFederatedSignIn, in)
	if got := status(); got[orgA] != MembershipActive || got[orgB] != MembershipSuspended {
		t.Fatalf("group gone: %v", got)
	}
	// It comes back: the provider's suspension lifts.
	in = fedSignIn(idpOrgA, "m-1", "mia@example.com", true, 3)
	in.OrgIDs, in.MembershipIDs = []string{orgA, orgB}, []string{importID(73), importID(74)}
	h.mustApply(TypeFederatedSignIn, in)
	if got := status(); got[orgB] != MembershipActive {
		t.Fatalf("group back: %v", got)
	}
	// A membership an operator made is never the provider's to suspend.
	in = fedSignIn(idpSite, "b-1", "bob@example.com", true, 4)
	h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: importID(75), UserID: userB, OrgID: orgB, Status: MembershipActive}})
	h.mustApply(TypeFederatedSignIn, in)
	ms, _ := h.f.State().MembershipsOfUser(userB)
	if len(ms) != 1 || ms[0].Status != MembershipActive || ms[0].ProviderID != "" {
		t.Fatalf("operator's membership: %+v", ms)
	}
}

// TestFederatedSessionsEnd: a session opened through a link ends when the
// upstream logs it out (by sid, by sub), when the link goes, when the
// provider goes and when its organization goes, with a logout token owed
// for each app session; a replayed jti is refused.
func TestFederatedSessionsEnd(t *testing.T) {
	open := func(h *harness, subject, sso string, n int) string {
		in := fedSignIn(idpSite, subject, subject+"@example.com", true, n)
		in.Session = fedSession(sso, t0)
		res := h.mustApply(TypeFederatedSignIn, in).Value.(FederatedSignInResult)
		s, err := h.f.State().SSOSession(sso)
		if err != nil || s.UserID != res.User.ID || s.IdentityID != res.Identity.ID || s.ProviderID != idpSite || s.UpstreamSID != "up-"+sso {
			t.Fatalf("session: %+v, %v", s, err)
		}
		h.mustApply(TypeIssueCode, IssueCode{NewSID: "sid-" + sso, IdleExpiresAt: t0.Add(time.Hour), Code: Code{
			Hash: "code-" + sso, ClientID: "app", UserID: res.User.ID, OrgID: orgA, SSOSessionID: sso, IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}})
		return res.Identity.ID
	}
	live := func(h *harness, ids ...string) []bool {
		var out []bool
		for _, id := range ids {
			s, err := h.f.State().SSOSession(id)
			out = append(out, err == nil && s.EndedAt.IsZero())
		}
		return out
	}
	endedSIDs := func(r Result) []string {
		var out []string
		for _, a := range r.Value.(EndedApps).Apps {
			out = append(out, a.ID)
		}
		slices.Sort(out)
		return out
	}
	t.Run("upstream logout by sid, then the replay", func(t *testing.T) {
		h := withProviders(t)
		open(h, "u1", "sso-a", 1)
		open(h, "u2", "sso-b", 2)
		lo := UpstreamLogout{ProviderID: idpSite, JTI: "j1", SID: "up-sso-a", ExpiresAt: t0.Add(time.Hour), At: t0.Add(time.Minute)}
		r := h.mustApply(TypeUpstreamLogout, lo)
		if got := fmt.Sprint(live(h, "sso-a", "sso-b")); got != "[false true]" {
			t.Fatalf("live after logout of sso-a's upstream session: %s", got)
		}
		if got := fmt.Sprint(endedSIDs(r)); got != "[sid-sso-a]" {
			t.Fatalf("app sessions ended: %s", got)
		}
		if r := h.apply(TypeUpstreamLogout, lo); !errors.Is(r.Err, ErrConflict) {
			t.Fatalf("replayed jti: %v", r.Err)
		}
		// A token naming sid and another subject ends nothing.
		r = h.mustApply(TypeUpstreamLogout, UpstreamLogout{ProviderID: idpSite, JTI: "j2", SID: "up-sso-b", Subject: "u1", ExpiresAt: t0.Add(time.Hour), At: t0})
		if got := fmt.Sprint(live(h, "sso-b")); got != "[true]" {
			t.Fatalf("sid of u2 with sub u1 ended it: %s", got)
		}
		// By sub alone.
		h.mustApply(TypeUpstreamLogout, UpstreamLogout{ProviderID: idpSite, JTI: "j3", Subject: "u2", ExpiresAt: t0.Add(time.Hour), At: t0})
		if got := fmt.Sprint(live(h, "sso-b")); got != "[false]" {
			t.Fatalf("logout by sub: %s", got)
		}
		// The jti is reaped once the token expired, and not before.
		h.mustApply(TypeReap, Reap{Before: t0.Add(30 * time.Minute)})
		if r := h.apply(TypeUpstreamLogout, lo); !errors.Is(r.Err, ErrConflict) {
			t.Fatalf("jti reaped before its token expired: %v", r.Err)
		}
		h.mustApply(TypeReap, Reap{Before: t0.Add(2 * time.Hour)})
		if r := h.apply(TypeUpstreamLogout, lo); r.Err != nil {
			t.Fatalf("jti after its expiry: %v", r.Err)
		}
	})
	t.Run("unlink keeps a way in", func(t *testing.T) {
		h := withProviders(t)
		id := open(h, "u1", "sso-a", 1)
		user := importID(801)
		r := h.apply(TypeUnlinkIdentity, UnlinkIdentity{UserID: user, IdentityID: id, KeepWayIn: true, At: t0})
		if got := refusal(r.Err); got != RefusedLastWayIn {
			t.Fatalf("unlinking the only way in: %q", got)
		}
		if r := h.apply(TypeUnlinkIdentity, UnlinkIdentity{UserID: userA, IdentityID: id, At: t0}); !errors.Is(r.Err, ErrNotFound) {
			t.Fatalf("unlinking another person's link: %v", r.Err)
		}
		r = h.mustApply(TypeUnlinkIdentity, UnlinkIdentity{UserID: user, IdentityID: id, At: t0})
		if got := fmt.Sprint(live(h, "sso-a"), endedSIDs(r)); got != "[false] [sid-sso-a]" {
			t.Fatalf("after the unlink: %s", got)
		}
		if ids, _ := h.f.State().Identities(user); len(ids) != 0 {
			t.Fatalf("links after unlink: %+v", ids)
		}
	})
	t.Run("provider deleted", func(t *testing.T) {
		h := withProviders(t)
		open(h, "u1", "sso-a", 1)
		r := h.mustApply(TypeDeleteIdentityProvider, DeleteIdentityProvider{ID: idpSite, At: t0})
		if got := fmt.Sprint(live(h, "sso-a"), endedSIDs(r)); got != "[false] [sid-sso-a]" {
			t.Fatalf("after the deletion: %s", got)
		}
		if ids, _ := h.f.State().Identities(importID(801)); len(ids) != 0 {
			t.Fatalf("links after the provider's deletion: %+v", ids)
		}
		if _, err := h.f.State().IdentityProviderBySlug("corp"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("slug after deletion: %v", err)
		}
	})
	t.Run("person erased", func(t *testing.T) {
		h := withProviders(t)
		open(h, "u1", "sso-a", 1)
		h.mustApply(TypeDeleteUser, DeleteUser{ID: importID(801), At: t0})
		if _, err := h.f.State().IdentityBySubject(idpSite, "u1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("link of an erased person: %v", err)
		}
		// The subject signs in afresh as a new person, not into a hole.
		if r := h.apply(TypeFederatedSignIn, fedSignIn(idpSite, "u1", "u1@example.com", true, 5)); r.Err != nil {
			t.Fatal(r.Err)
		}
	})
	t.Run("organization deleted takes its providers", func(t *testing.T) {
		h := withProviders(t)
		in := fedSignIn(idpOrgA, "o1", "o1@example.com", true, 1)
		in.Session = fedSession("sso-o", t0)
		h.mustApply(TypeFederatedSignIn, in)
		h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgA, At: t0})
		if _, err := h.f.State().IdentityProvider(idpOrgA); !errors.Is(err, ErrNotFound) {
			t.Fatalf("org provider after its org's deletion: %v", err)
		}
		if got := fmt.Sprint(live(h, "sso-o")); got != "[false]" {
			t.Fatalf("session through it: %s", got)
		}
	})
	t.Run("reap removes the session indexes", func(t *testing.T) {
		h := withProviders(t)
		id := open(h, "u1", "sso-a", 1)
		h.mustApply(TypeReap, Reap{Before: t0.Add(24 * time.Hour)})
		if _, err := h.f.State().SSOSession("sso-a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("session not reaped: %v", err)
		}
		if n := countPrefix(h, bucketSSOByIdent, id); n != 0 {
			t.Fatalf("%d sso_by_identity entries left", n)
		}
		if n := countPrefix(h, bucketSSOByUpstream, upstreamSIDKey(idpSite, "up-sso-a")); n != 0 {
			t.Fatalf("%d sso_by_upstream entries left", n)
		}
	})
}

func TestStartSSOSessionTakesNoLink(t *testing.T) {
	h := withProviders(t)
	r := h.apply(TypeStartSSOSession, StartSSOSession{TokenHash: "t", Session: SSOSession{ID: "s", UserID: userA, IdentityID: "forged",
		CreatedAt: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)}})
	if !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a plain session claiming a link: %v", r.Err)
	}
}

func TestAccountLink(t *testing.T) {
	h := withProviders(t)
	in := fedSignIn(idpSite, "x-1", "someone.else@other.org", false, 1)
	in.AccountUserID = userB
	res := h.mustApply(TypeFederatedSignIn, in).Value.(FederatedSignInResult)
	if res.User.ID != userB || !res.Linked || res.Created {
		t.Fatalf("account link: %+v", res)
	}
	// The same subject from another signed-in person: refused.
	in = fedSignIn(idpSite, "x-1", "", false, 2)
	in.AccountUserID = userA
	if got := refusal(h.apply(TypeFederatedSignIn, in).Err); got != RefusedLinkedElsewhere {
		t.Fatalf("someone else's subject: %q", got)
	}
	// Bob has a password-less account here: the link is his only way in
	// once he has no password, so it cannot be unlinked on /account.
	if got := refusal(h.apply(TypeUnlinkIdentity, UnlinkIdentity{UserID: userB, IdentityID: res.Identity.ID, KeepWayIn: true, At: t0}).Err); got != RefusedLastWayIn {
		t.Fatalf("bob's only way in: %q", got)
	}
	h.mustApply(TypeUpdateUser, UpdateUser{ID: userB, PasswordHash: ptr("$argon2id$x"), At: t0})
	if r := h.applyStamped(TypeUnlinkIdentity, UnlinkIdentity{UserID: userB, IdentityID: res.Identity.ID, KeepWayIn: true, At: t0},
		Audit{Type: EventAccount, Actor: ActorPerson, Time: t0, Detail: map[string]string{"action": "identity-unlink", "provider": "corp"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The unlink is an identity event of bob's, beside the account event.
	ev := h.lastEvent()
	if ev.Type != EventIdentity || ev.Subject != userB || ev.Detail["action"] != "unlinked" || ev.Detail["identity_id"] != res.Identity.ID || ev.Detail["provider"] != "corp" {
		t.Fatalf("the unlink's last event: %+v", ev)
	}
	if es := h.events(AuditQuery{Type: EventIdentity, Subject: userB}); len(es) != 1 {
		t.Fatalf("bob's identity events: %+v", es)
	}
}

func countPrefix(h *harness, bucket []byte, prefix string) int {
	h.t.Helper()
	var n int
	if err := h.f.db.View(func(tx *bolt.Tx) error { n = len(prefixKeys(tx, bucket, prefix)); return nil }); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestAccountLinkEndsOtherSessions: a link or an unlink on /account is a
// change of a way in, so the person's other sessions end in the same
// write and the one making the change stays.
func TestAccountLinkEndsOtherSessions(t *testing.T) {
	h := withProviders(t)
	start := func(id string) {
		s := fedSession(id, t0)
		s.Session.UserID, s.Session.UpstreamSID = userB, ""
		h.mustApply(TypeStartSSOSession, *s)
	}
	live := func(id string) bool {
		s, err := h.f.State().SSOSession(id)
		return err == nil && s.EndedAt.IsZero()
	}
	start("sso-here")
	start("sso-laptop")
	in := fedSignIn(idpSite, "b-1", "", false, 1)
	in.AccountUserID, in.EndSessions = userB, &EndSessions{Except: "sso-here", At: t0}
	res := h.mustApply(TypeFederatedSignIn, in).Value.(FederatedSignInResult)
	if !live("sso-here") || live("sso-laptop") {
		t.Fatalf("after the link: here %v, laptop %v; want only here live", live("sso-here"), live("sso-laptop"))
	}
	// EndSessions belongs to an /account link only.
	bad := fedSignIn(idpSite, "b-2", "b2@example.com", true, 2)
	bad.EndSessions = &EndSessions{At: t0}
	if r := h.apply(TypeFederatedSignIn, bad); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("EndSessions on a sign-in: %v", r.Err)
	}
	start("sso-phone")
	h.mustApply(TypeUpdateUser, UpdateUser{ID: userB, PasswordHash: ptr("$argon2id$x"), At: t0})
	h.mustApply(TypeUnlinkIdentity, UnlinkIdentity{UserID: userB, IdentityID: res.Identity.ID, KeepWayIn: true, EndSessions: &EndSessions{Except: "sso-here", At: t0}, At: t0})
	if !live("sso-here") || live("sso-phone") {
		t.Fatalf("after the unlink: here %v, phone %v; want only here live", live("sso-here"), live("sso-phone"))
	}
}
