package signin

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/ldaptest"
)

// TestSignInTimingUnknownLikeWrongPassword: with a directory registered,
// an address nobody holds (neither a local person nor the directory), a
// local person without a password, a directory person with a wrong
// password and a person whose stored hash is refused all take as long as
// a wrong password for a local person, so the time of the answer does not
// tell which addresses are local accounts. The node's real argon2id
// parameters are used, so the derivation dominates; each round times
// every case once, interleaved, and the test compares medians of the same
// run.
func TestSignInTimingUnknownLikeWrongPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	const (
		rounds = 9
		low    = 0.6
		high   = 1.6
	)
	s := ldaptest.Start(t, ldaptest.Person("dee", "dee@corp.example", "dee-directory-pw"))
	hasher := password.New(password.DefaultParams(), runtime.GOMAXPROCS(0))
	h := newHarness(t, func(c *Config) { c.Hasher = hasher })
	now := h.clock.Now()
	real := h.hashWith(hasher, hPassword)
	h.apply(fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUser, PasswordHash: &real, At: now})
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: "1c000000-0000-4000-8000-000000000003",
		Email: "nopass@example.com", CreatedAt: now}})
	own := hasher.Params()
	costly := fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g",
		8*own.Memory+8, own.Time)
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: "1d000000-0000-4000-8000-000000000004",
		Email: "costly@example.com", PasswordHash: costly, CreatedAt: now}})
	const dirID = "3d000000-0000-4000-8000-000000000001"
	bind, err := (*kek.KEK)(nil).Seal([]byte(ldaptest.AdminPassword), fsm.DirectoryAAD(dirID))
	if err != nil {
		t.Fatal(err)
	}
	h.apply(fsm.TypePutDirectory, fsm.PutDirectory{Create: true, Directory: fsm.Directory{
		ID: dirID, Name: "Corp", URL: s.LDAPSURL(), CAPEM: s.CAPEM, BindDN: ldaptest.AdminDN, BindPassword: bind,
		UserBase: "ou=people," + ldaptest.Base, UserFilter: "(&(objectClass=inetOrgPerson)(mail=%s))",
		IDAttribute: "entryUUID", EmailAttribute: "mail", SyncInterval: time.Hour, CreatedAt: now, UpdatedAt: now}})

	ctx := context.Background()
	check := func(email string) time.Duration {
		t.Helper()
		start := time.Now()
		_, ok, _, err := h.p.checkPassword(ctx, email, "not the password")
		d := time.Since(start)
		if ok || err != nil {
			t.Fatalf("%s: got %v, %v; want a refusal", email, ok, err)
		}
		return d
	}
	const reference = hEmail // a local person, wrong password
	cases := []struct{ name, email string }{
		{"unknown address, the directory does not know it", "nobody@corp.example"},
		{"local person without a password", "nopass@example.com"},
		{"directory person, wrong password", "dee@corp.example"},
		{"stored argon2id above the caps", "costly@example.com"},
	}
	emails := []string{reference}
	for _, c := range cases {
		emails = append(emails, c.email)
	}
	for _, e := range emails {
		check(e) // warm up: the directory's client, the allocator
	}
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	// measure runs rounds of every case, interleaved, and returns what is
	// out of the band. Under make test other packages' tests share the two
	// cores, so a burst can land on one case's rounds: a run passes when
	// one of its attempts is within the band. A real tell (ratios of 0.02
	// and 9.2 before the decoy) is out of it in every attempt.
	measure := func() []string {
		times := make([][]time.Duration, len(emails))
		for range rounds {
			for i, e := range emails {
				times[i] = append(times[i], check(e))
			}
		}
		ref := median(times[0])
		t.Logf("local person, wrong password: median %v", ref)
		var out []string
		for i, c := range cases {
			m := median(times[i+1])
			ratio := float64(m) / float64(ref)
			t.Logf("%s: median %v, ratio %.2f", c.name, m, ratio)
			if ratio < low || ratio > high {
				out = append(out, fmt.Sprintf("%s: median %v against %v for a wrong password, ratio %.2f; want %.1f to %.1f",
					c.name, m, ref, ratio, low, high))
			}
		}
		return out
	}
	const attempts = 3
	for a := 1; ; a++ {
		out := measure()
		if len(out) == 0 {
			return
		}
		if a == attempts {
			for _, o := range out {
				t.Error(o)
			}
			return
		}
		t.Logf("attempt %d of %d out of the band; measuring again", a, attempts)
	}
}

// hashWith hashes s with hasher (not the harness's cheap one).
func (h *harness) hashWith(hasher *password.Hasher, s string) string {
	h.t.Helper()
	out, err := hasher.Hash(context.Background(), s)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}
