package password

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// argon2idWith is a well-formed argon2id string at p, with a zero salt and
// key: what a hostile or careless import could bring.
func argon2idWith(p Params) string {
	return encode(p, make([]byte, SaltLen), make([]byte, KeyLen))
}

// countDerivations makes h count the derivations it starts.
func countDerivations(h *Hasher) *atomic.Int32 {
	var n atomic.Int32
	h.onDerive = func(delta int) {
		if delta > 0 {
			n.Add(1)
		}
	}
	return &n
}

// TestArgon2Caps: an argon2id string above the Hasher's caps (8 times its
// own memory, 10 passes, 16 lanes) is refused by Check, with an error that
// names the cap, and by Verify without a derivation; one at the caps is
// accepted and verifies.
func TestArgon2Caps(t *testing.T) {
	own := Params{Memory: 64, Time: 1, Threads: 1}
	h := New(own, 2)
	derived := countDerivations(h)
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		p       Params
		mention string // "" when accepted
	}{
		{"own", own, ""},
		{"at every cap", Params{Memory: 8 * 64, Time: MaxArgon2Time, Threads: MaxArgon2Threads}, ""},
		{"memory above 8 times the node's", Params{Memory: 8*64 + 8, Time: 1, Threads: 1}, "m=520 KiB is above the cap of 512 KiB"},
		{"a gibibyte", Params{Memory: MaxMemory, Time: 1, Threads: 1}, "cap of 512 KiB"},
		{"11 passes", Params{Memory: 64, Time: MaxArgon2Time + 1, Threads: 1}, "t=11 is above the cap of 10 passes"},
		{"64 passes", Params{Memory: 64, Time: MaxTime, Threads: 1}, "cap of 10 passes"},
		{"17 lanes", Params{Memory: 8 * 17, Time: 1, Threads: MaxArgon2Threads + 1}, "p=17 is above the cap of 16 lanes"},
		{"255 lanes", Params{Memory: 8 * 255, Time: 1, Threads: 255}, "cap of"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mention == "" {
				stored, err := New(tt.p, 1).Hash(ctx, importedSecret)
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Check(stored); err != nil {
					t.Fatalf("Check: got %v, want nil", err)
				}
				if ok, err := h.Verify(ctx, importedSecret, stored); !ok || err != nil {
					t.Fatalf("Verify: got %v, %v; want true, nil", ok, err)
				}
				return
			}
			stored := argon2idWith(tt.p)
			err := h.Check(stored)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("Check: got %v, want %v mentioning %q", err, ErrMalformed, tt.mention)
			}
			before := derived.Load()
			if ok, err := h.Verify(ctx, importedSecret, stored); ok || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Verify: got %v, %v; want false, %v", ok, err, ErrMalformed)
			}
			if got := derived.Load() - before; got != 0 {
				t.Fatalf("Verify ran %d derivations of a refused string, want 0", got)
			}
		})
	}
}

// TestArgon2CapsKeepOwnHashes: a node whose own passes or lanes exceed the
// fixed caps still verifies its own hashes, and does not rehash them.
func TestArgon2CapsKeepOwnHashes(t *testing.T) {
	own := Params{Memory: 8 * 20, Time: MaxArgon2Time + 2, Threads: MaxArgon2Threads + 4}
	h := New(own, 1)
	ctx := context.Background()
	stored, err := h.Hash(ctx, importedSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Check(stored); err != nil {
		t.Fatalf("Check: got %v, want nil", err)
	}
	if ok, err := h.Verify(ctx, importedSecret, stored); !ok || err != nil {
		t.Fatalf("Verify: got %v, %v; want true, nil", ok, err)
	}
	if h.NeedsRehash(stored) {
		t.Error("NeedsRehash: got true for the node's own hash")
	}
	above := argon2idWith(Params{Memory: 8 * 20, Time: own.Time + 1, Threads: 1})
	if err := h.Check(above); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cap of %d passes", own.Time)) {
		t.Errorf("Check of t=%d: got %v, want the cap of %d passes", own.Time+1, err, own.Time)
	}
}

// TestDecoy: a decoy is one derivation at the Hasher's own cost, under the
// same semaphore as any other.
func TestDecoy(t *testing.T) {
	h := New(cheap, 1)
	derived := countDerivations(h)
	if err := h.Decoy(context.Background(), "pw"); err != nil || derived.Load() != 1 {
		t.Fatalf("got %v and %d derivations, want nil and 1", err, derived.Load())
	}
	h.sem <- struct{}{} // occupy the only slot
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.Decoy(ctx, "pw"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v while the slot is taken, want %v", err, context.DeadlineExceeded)
	}
	<-h.sem
}

// TestDerivationsBoundedByGOMAXPROCS: many more callers than cores, each
// hashing, verifying every scheme and spending decoys, never have more
// than GOMAXPROCS derivations running at once on a Hasher built as a node
// builds it; and they do reach that many (each derivation holds its slot a
// moment, so the others pile up).
func TestDerivationsBoundedByGOMAXPROCS(t *testing.T) {
	limit := runtime.GOMAXPROCS(0)
	h := New(cheap, limit)
	ctx := context.Background()
	own, err := h.Hash(ctx, importedSecret)
	if err != nil {
		t.Fatal(err)
	}
	stored := []string{own}
	for _, v := range importedVectors {
		if v.scheme == SchemeBcrypt || v.name == "pbkdf2-sha256 passlib" {
			stored = append(stored, v.stored)
		}
	}
	var running, peak atomic.Int32
	h.onDerive = func(delta int) {
		n := running.Add(int32(delta))
		if delta < 0 {
			return
		}
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for range 4*limit + 2 {
		wg.Go(func() {
			for _, s := range stored {
				if ok, err := h.Verify(ctx, importedSecret, s); !ok || err != nil {
					t.Errorf("Verify(%.12s...): got %v, %v", s, ok, err)
				}
			}
			if _, err := h.Hash(ctx, importedSecret); err != nil {
				t.Error(err)
			}
			if err := h.Decoy(ctx, importedSecret); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	t.Logf("GOMAXPROCS %d, at most %d derivations at once", limit, peak.Load())
	if got := peak.Load(); got > int32(limit) {
		t.Errorf("got %d derivations at once, want at most GOMAXPROCS = %d", got, limit)
	} else if got < int32(limit) {
		t.Errorf("got at most %d derivations at once, want the callers to fill all %d slots", got, limit)
	}
	if got := running.Load(); got != 0 {
		t.Errorf("got %d derivations still counted as running, want 0", got)
	}
}
