package fsmtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// grownOrgA and grownOrgB are the two organizations every Grown person belongs to.
const (
	grownOrgA = "00000000-0000-4000-8000-00000000000a"
	grownOrgB = "00000000-0000-4000-8000-00000000000b"
)

// grownClient is the app every Grown person is signed in to.
const grownClient = "00000000-0000-4000-8000-0000000000c1"

// grownID is the i-th id of a Grown store.
func grownID(i int) string { return fmt.Sprintf("00000000-0000-4000-9000-%012d", i) }

// Grown gives, in batches of at most fsm.MaxImportBatch commands, the
// commands that grow a store to n signed-in people (to measure what grows
// with the state): two organizations; n people imported with a
// membership in each; and for each person one live SSO session (live
// from at for an hour), one app session and one redeemed code, the
// record a live access token keeps until it expires. Ids are fixed by
// position, so two stores grown alike hold the same records.
//
// The commands of one batch do not depend on each other (they may be
// applied in any order, or at once); each batch depends on those before
// it. emit's error ends the growth.
func Grown(n int, at time.Time, emit func([]fsm.Command) error) error {
	if err := emit([]fsm.Command{
		fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: grownOrgA, Slug: "grown-a", Name: "Grown A", CreatedAt: at}),
		fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: grownOrgB, Slug: "grown-b", Name: "Grown B", CreatedAt: at}),
		fsm.MustCommand(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{ID: grownClient, Name: "Grown", Type: "public",
			RedirectURIs: []string{"https://app.example.com/callback"}, Scopes: []string{"openid", "email"}, OrganizationID: grownOrgA,
			AccessTokenTTL: 3600, SkipConsent: true, CreatedAt: at, UpdatedAt: at}}),
	}); err != nil {
		return err
	}
	// A bcrypt hash, as an import from another provider brings: checked
	// only at a sign-in, which a grown store's people never make.
	const hash = "$2b$10$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS"
	for done := 0; done < n; {
		c := fsm.ImportUsers{At: at}
		for ; done < n && len(c.Users) < fsm.MaxImportBatch; done++ {
			c.Users = append(c.Users, fsm.ImportedUser{
				User:          fsm.User{ID: grownID(done), Email: fmt.Sprintf("p%d@grown.example.com", done), PasswordHash: hash},
				OrgIDs:        []string{grownOrgA, grownOrgB},
				MembershipIDs: []string{grownID(10_000_000 + 2*done), grownID(10_000_001 + 2*done)},
			})
		}
		if err := emit([]fsm.Command{fsm.MustCommand(fsm.TypeImportUsers, c)}); err != nil {
			return err
		}
	}
	for first := 0; first < n; first += fsm.MaxImportBatch {
		last := min(first+fsm.MaxImportBatch, n)
		var start, issue, redeem []fsm.Command
		for i := first; i < last; i++ {
			sso := grownID(30_000_000 + i)
			code := fmt.Sprintf("%064x", 1<<40+i)
			start = append(start, fsm.MustCommand(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: fmt.Sprintf("%064x", i), Session: fsm.SSOSession{
				ID: sso, UserID: grownID(i), AuthTime: at, AMR: []string{"pwd"}, CreatedAt: at, LastSeen: at,
				IdleExpiresAt: at.Add(time.Hour), ExpiresAt: at.Add(24 * time.Hour)}}))
			issue = append(issue, fsm.MustCommand(fsm.TypeIssueCode, fsm.IssueCode{NewSID: grownID(40_000_000 + i), IdleExpiresAt: at.Add(time.Hour), Code: fsm.Code{
				Hash: code, ClientID: grownClient, RedirectURI: "https://app.example.com/callback", UserID: grownID(i), OrgID: grownOrgA,
				SSOSessionID: sso, Scopes: []string{"openid", "email"}, Nonce: "n", Challenge: "c", AuthTime: at, AMR: []string{"pwd"},
				IssuedAt: at, ExpiresAt: at.Add(time.Minute)}}))
			redeem = append(redeem, fsm.MustCommand(fsm.TypeRedeemCode, fsm.RedeemCode{Hash: code, ClientID: grownClient, At: at.Add(time.Second),
				AccessJTI: grownID(50_000_000 + i), AccessExpires: at.Add(time.Hour)}))
		}
		for _, batch := range [][]fsm.Command{start, issue, redeem} {
			if err := emit(batch); err != nil {
				return err
			}
		}
	}
	return nil
}

// GrowThrough applies Grown(n, at) through apply (a cluster's Apply),
// the commands of each batch from writers goroutines at once, so that
// raft batches them as it would a busy site's writes. It returns how
// many commands it applied, and the first error (a failed apply or a
// command's own error) after the batch that met it.
func GrowThrough(n int, at time.Time, writers int, apply func(context.Context, fsm.Command) (fsm.Result, error)) (int, error) {
	writes := 0
	err := Grown(n, at, func(cmds []fsm.Command) error {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
			next  = make(chan fsm.Command)
		)
		for range min(writers, len(cmds)) {
			wg.Go(func() {
				for cmd := range next {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					res, err := apply(ctx, cmd)
					cancel()
					if err == nil {
						err = res.Err
					}
					if err != nil {
						mu.Lock()
						if first == nil {
							first = fmt.Errorf("%v: %w", cmd.Type, err)
						}
						mu.Unlock()
					}
				}
			})
		}
		for _, cmd := range cmds {
			next <- cmd
		}
		close(next)
		wg.Wait()
		writes += len(cmds)
		return first
	})
	return writes, err
}

// GrownSizes are the store sizes the grown-store benchmarks measure
// (10,000, 100,000 and 1,000,000 people) up to most.
func GrownSizes(most int) []int {
	var out []int
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		if n <= most {
			out = append(out, n)
		}
	}
	return out
}
