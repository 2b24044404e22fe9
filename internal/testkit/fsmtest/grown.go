package fsmtest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
)

// grownOrgA and grownOrgB are the two organizations every Grown person belongs to.
const (
	grownOrgA = "00000000-0000-4000-8000-00000000000a"
	grownOrgB = "00000000-0000-4000-8000-00000000000b"
)

// grownClient is the app every Grown person is signed in to.
const grownClient = "00000000-0000-4000-8000-0000000000c1"

// grownID is the i-th id of a Grown store: a version 4 UUID that looks
// random, as the product's ids are (crypto/rand), but is fixed by i.
// Ids in order would leave every bbolt page half full (it splits a full
// page in two halves, and in-order keys never go back to fill them),
// which no real store sees: its keys come in at random.
func grownID(i int) string {
	h := grownBytes("id", i)
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// grownHash is the i-th token hash of kind (a code's or a cookie
// secret's SHA-256, hex), fixed by i and looking random as a real one does.
func grownHash(kind string, i int) string {
	h := grownBytes(kind, i)
	return hex.EncodeToString(h[:])
}

func grownBytes(kind string, i int) [sha256.Size]byte {
	return sha256.Sum256(binary.BigEndian.AppendUint64([]byte("oidcd grown "+kind+" "), uint64(i)))
}

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
			code := grownHash("code", i)
			start = append(start, fsm.MustCommand(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: grownHash("sso", i), Session: fsm.SSOSession{
				ID: sso, UserID: grownID(i), AuthTime: at, AMR: []string{"pwd"}, CreatedAt: at, LastSeen: at,
				IdleExpiresAt: at.Add(time.Hour), ExpiresAt: at.Add(24 * time.Hour)}}))
			// The code lives an hour, not a minute: growing a million people
			// through a running node's raft takes longer than a minute, and
			// its reaper removes a code still unredeemed past its expiry.
			issue = append(issue, fsm.MustCommand(fsm.TypeIssueCode, fsm.IssueCode{NewSID: grownID(40_000_000 + i), IdleExpiresAt: at.Add(time.Hour), Code: fsm.Code{
				Hash: code, ClientID: grownClient, RedirectURI: "https://app.example.com/callback", UserID: grownID(i), OrgID: grownOrgA,
				SSOSessionID: sso, Scopes: []string{"openid", "email"}, Nonce: "n", Challenge: "c", AuthTime: at, AMR: []string{"pwd"},
				IssuedAt: at, ExpiresAt: at.Add(time.Hour)}}))
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

// GrownEventBatch is how many commands one batch of GrownEvents holds.
const GrownEventBatch = 1 << 16

// GrownEvents gives, in batches of at most GrownEventBatch commands, the
// commands that record n audit events on a store grown by Grown(people,
// at): each a TypeAuditEvent (the command that records only its stamp),
// so every event is a real replicated one whose seq and hash each replica
// computes in the apply. They are what a busy site's trail holds most
// of: a token event (with its own jti) for every fourth, a sign-in (with
// its own session id) for the rest, of person i mod people at the app,
// from one of 458,752 addresses through one of three nodes, a
// millisecond apart from at on. The commands of a batch do not
// depend on each other (the order they are applied in gives their seqs).
func GrownEvents(n, people int, at time.Time, emit func([]fsm.Command) error) error {
	people = max(people, 1)
	for first := 0; first < n; first += GrownEventBatch {
		last := min(first+GrownEventBatch, n)
		cmds := make([]fsm.Command, 0, last-first)
		for i := first; i < last; i++ {
			p := i % people
			a := fsm.Audit{Type: fsm.EventSignin, Actor: fsm.ActorPerson, Subject: grownID(p), ClientID: grownClient,
				OrgID: grownOrgA, SID: grownID(60_000_000 + i), IP: fmt.Sprintf("10.%d.%d.%d", i%7, (i/7)%256, (i/1792)%256),
				Node: fmt.Sprintf("node-%d", i%3), Time: at.Add(time.Duration(i) * time.Millisecond).UTC(),
				Detail: map[string]string{"method": "pwd"}}
			if i%4 == 3 {
				a.Type, a.Actor = fsm.EventToken, fsm.ActorClient
				a.Detail = map[string]string{"grant_type": "authorization_code", "jti": grownID(70_000_000 + i)}
			}
			cmds = append(cmds, fsm.NewAuditEvent(a))
		}
		if err := emit(cmds); err != nil {
			return err
		}
	}
	return nil
}

// GrowEventsThrough applies GrownEvents(n, people, at) through apply as
// GrowThrough does, and returns how many commands it applied.
func GrowEventsThrough(n, people int, at time.Time, writers int, apply func(context.Context, fsm.Command) (fsm.Result, error)) (int, error) {
	writes := 0
	err := GrownEvents(n, people, at, func(cmds []fsm.Command) error {
		err := applyAll(cmds, writers, apply)
		writes += len(cmds)
		return err
	})
	return writes, err
}

// GrowThrough applies Grown(n, at) through apply (a cluster's Apply),
// the commands of each batch from writers goroutines at once, so that
// raft batches them as it would a busy site's writes. It returns how
// many commands it applied, and the first error (a failed apply or a
// command's own error) after the batch that met it.
func GrowThrough(n int, at time.Time, writers int, apply func(context.Context, fsm.Command) (fsm.Result, error)) (int, error) {
	writes := 0
	err := Grown(n, at, func(cmds []fsm.Command) error {
		err := applyAll(cmds, writers, apply)
		writes += len(cmds)
		return err
	})
	return writes, err
}

// applyAll applies cmds through apply from writers goroutines at once
// and returns the first error (a failed apply or a command's own).
func applyAll(cmds []fsm.Command, writers int, apply func(context.Context, fsm.Command) (fsm.Result, error)) error {
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
	return first
}

// grownDirectBatch bounds the commands one ApplyBatch of GrowDirect
// applies (one bbolt transaction).
const grownDirectBatch = 8192

// GrowDirect grows f as GrowThrough and GrowEventsThrough would through a
// cluster, but straight through f.ApplyBatch (no raft, no network), at
// the indexes after f.Applied(), up to grownDirectBatch commands a
// transaction (raft's batches are 64 entries; here the fsync of each
// commit is most of the time): first the state's format raised to
// fsm.CurrentFormat (as a cluster's leader raises it), then Grown(people,
// at), then GrownEvents(events, people, at). The apply is the replicas'
// own, so every event's seq and hash are what a cluster's replicas
// compute for the same commands in the same order; f's mover moves them
// into its trail meanwhile. It returns the first command error.
func GrowDirect(f *fsm.FSM, people, events int, at time.Time) error {
	index := f.Applied()
	apply := func(cmds []fsm.Command) error {
		for len(cmds) > 0 {
			k := min(len(cmds), grownDirectBatch)
			logs := make([]*raft.Log, k)
			for i, cmd := range cmds[:k] {
				index++
				logs[i] = &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: cmd.Encode()}
			}
			for i, r := range f.ApplyBatch(logs) {
				res, ok := r.(fsm.Result)
				if !ok {
					return fmt.Errorf("fsmtest: apply %v at %d: %v", cmds[i].Type, logs[i].Index, r)
				}
				if res.Err != nil {
					return fmt.Errorf("fsmtest: apply %v at %d: %w", cmds[i].Type, logs[i].Index, res.Err)
				}
			}
			cmds = cmds[k:]
		}
		return nil
	}
	if err := apply([]fsm.Command{fsm.MustCommand(fsm.TypeSetStateFormat,
		fsm.SetStateFormat{Format: fsm.CurrentFormat, Version: fsm.FormatRelease(fsm.CurrentFormat)})}); err != nil {
		return err
	}
	if err := Grown(people, at, apply); err != nil {
		return err
	}
	return GrownEvents(events, people, at, apply)
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
