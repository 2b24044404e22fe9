package fsm

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// digest is the access epoch and a hash of everything in the buckets it
// covers.
type digest struct {
	epoch uint64
	sum   [sha256.Size]byte
}

func accessDigest(t testing.TB, f *FSM) digest {
	t.Helper()
	var d digest
	if err := f.view(func(tx *bolt.Tx) error {
		h := sha256.New()
		for _, b := range accessBuckets {
			fmt.Fprintf(h, "%s\x00", b)
			if err := tx.Bucket(b).ForEach(func(k, v []byte) error {
				fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(v), v)
				return nil
			}); err != nil {
				return err
			}
		}
		copy(d.sum[:], h.Sum(nil))
		d.epoch = accessEpoch(tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// checkAccessEpoch fails the test when what changed the covered buckets
// left the epoch where it was: the access cache would then serve the old
// records. Every apply of the harness and the fuzzer goes through it, so
// every command those tests write is held to it.
func checkAccessEpoch(t testing.TB, what string, before, after digest) {
	t.Helper()
	if before.sum != after.sum && before.epoch == after.epoch {
		t.Fatalf("%s changed the client, organization, membership or person records but not the access epoch (%d)", what, after.epoch)
	}
}

// TestAccessEpochGuardCatchesAWriteAroundIt: a write straight to a
// covered bucket, not through put, del, putIndex or the reaper, is what
// the guard exists to catch.
func TestAccessEpochGuardCatchesAWriteAroundIt(t *testing.T) {
	h := signedIn(t)
	before := accessDigest(t, h.f)
	if err := h.f.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOrgs).Delete([]byte(orgA)) }); err != nil {
		t.Fatal(err)
	}
	ft := &fakeT{TB: t}
	checkAccessEpoch(ft, "a raw delete", before, accessDigest(t, h.f))
	if !ft.failed {
		t.Fatal("a write around the epoch passed the guard")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(string, ...any) {
	f.failed = true
}

// TestAccessCacheRacesWithChanges: checks run while a membership is
// suspended and restored over and over; a check that starts after a
// suspension was applied never passes, and one after the restoring
// apply never fails for it.
func TestAccessCacheRacesWithChanges(t *testing.T) {
	h := signedIn(t)
	issue(h, "c1", orgA, "sid-1", t0)
	redeem(h, "c1", "app", "jti-1", t0.Add(time.Second))
	var mu sync.Mutex // guards suspended against the applies
	suspended := false
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				want := suspended
				_, err := h.f.State().CheckAccess("jti-1", "sid-1", t0.Add(time.Minute), true)
				mu.Unlock()
				if got := errors.Is(err, ErrAccessChanged); got != want || (err != nil && !got) {
					t.Errorf("suspended %v: CheckAccess %v", want, err)
					return
				}
			}
		})
	}
	for i := range 200 {
		status := MembershipSuspended
		if i%2 == 1 {
			status = MembershipActive
		}
		mu.Lock()
		h.mustApply(TypeUpdateMembership, UpdateMembership{ID: memA, Status: status})
		suspended = status == MembershipSuspended
		mu.Unlock()
		if i%10 == 0 {
			h.f.State().CheckAccess("jti-1", "sid-1", t0.Add(time.Minute), false) // fill between changes
		}
	}
	close(stop)
	wg.Wait()
}
