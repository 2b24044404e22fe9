package fsm

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkReapLive: one Reap that finds nothing to delete in a store of
// n live SSO sessions (written through StartSSOSession in batches): what
// one reap costs every node's apply loop as the store grows, examining
// every record (limit=0, before Reap.Limit) or ReapLimit of each bucket.
func BenchmarkReapLive(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, limit := range []int{0, ReapLimit} {
			benchmarkReapLive(b, n, limit)
		}
	}
}

func benchmarkReapLive(b *testing.B, n, limit int) {
	b.Run(fmt.Sprintf("sessions=%d/limit=%d", n, limit), func(b *testing.B) {
		f, err := Open(filepath.Join(b.TempDir(), "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		index := uint64(1)
		user := importID(1)
		f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(TypeCreateUser, CreateUser{User: User{ID: user, Email: "p@example.com", CreatedAt: t0}}).Encode()})
		for done := 0; done < n; {
			logs := make([]*raft.Log, 0, 1000)
			for ; done < n && len(logs) < 1000; done++ {
				index++
				s := SSOSession{ID: importID(100 + done), UserID: user, AuthTime: t0, AMR: []string{"pwd"}, CreatedAt: t0, LastSeen: t0,
					IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(24 * time.Hour)}
				logs = append(logs, &raft.Log{Index: index, Type: raft.LogCommand,
					Data: MustCommand(TypeStartSSOSession, StartSSOSession{Session: s, TokenHash: fmt.Sprintf("%064x", done)}).Encode()})
			}
			for _, r := range f.ApplyBatch(logs) {
				if res := r.(Result); res.Err != nil {
					b.Fatal(res.Err)
				}
			}
		}
		b.ResetTimer()
		for b.Loop() {
			index++
			r := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(TypeReap, Reap{Before: t0, Limit: limit}).Encode()}).(Result)
			if r.Err != nil || r.Value.(ReapStats).SSOSessions != 0 {
				b.Fatalf("reap: %+v", r)
			}
		}
	})
}

// TestReapLimit: a limited Reap examines at most Limit records of a
// bucket, goes on from where the last one stopped, wraps around, and over
// one sweep deletes exactly what a full Reap deletes.
func TestReapLimit(t *testing.T) {
	f, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	index := uint64(0)
	apply := func(typ Type, v any) Result {
		t.Helper()
		index++
		return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(typ, v).Encode()}).(Result)
	}
	user := importID(1)
	if r := apply(TypeCreateUser, CreateUser{User: User{ID: user, Email: "p@example.com", CreatedAt: t0}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	const n = 10
	for i := range n {
		idle := t0.Add(time.Hour)
		if i%2 == 0 {
			idle = t0.Add(time.Minute) // dead at t0+2m
		}
		s := SSOSession{ID: importID(100 + i), UserID: user, AuthTime: t0, AMR: []string{"pwd"}, CreatedAt: t0, LastSeen: t0,
			IdleExpiresAt: idle, ExpiresAt: t0.Add(24 * time.Hour)}
		if r := apply(TypeStartSSOSession, StartSSOSession{Session: s, TokenHash: fmt.Sprintf("%064x", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	reap := func(before time.Time, limit int) ReapStats {
		t.Helper()
		r := apply(TypeReap, Reap{Before: before, Limit: limit})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Value.(ReapStats)
	}
	left := func() int {
		t.Helper()
		count := 0
		if err := f.db.View(func(tx *bolt.Tx) error { count = tx.Bucket(bucketSSO).Stats().KeyN; return nil }); err != nil {
			t.Fatal(err)
		}
		return count
	}

	// One sweep at Limit 3: rounds of 3, 3, 3 and 1 records.
	var deleted, rounds int
	for st := (ReapStats{More: true}); st.More; rounds++ {
		if rounds == 10 {
			t.Fatal("the sweep does not end")
		}
		st = reap(t0.Add(2*time.Minute), 3)
		if st.SSOSessions > 3 {
			t.Fatalf("round %d deleted %d sessions, more than its limit", rounds, st.SSOSessions)
		}
		deleted += st.SSOSessions
	}
	if rounds != 4 || deleted != n/2 || left() != n/2 {
		t.Errorf("sweep: %d rounds, %d deleted, %d left; want 4, %d, %d", rounds, deleted, left(), n/2, n/2)
	}
	// The next sweep starts over: nothing more is dead yet.
	if st := reap(t0.Add(2*time.Minute), 3); st.SSOSessions != 0 || !st.More {
		t.Errorf("a new sweep: %+v, want nothing deleted and more to come", st)
	}
	// The rest die; a full Reap takes them all at once.
	if st := reap(t0.Add(2*time.Hour), 0); st.SSOSessions != n/2 || st.More || left() != 0 {
		t.Errorf("full reap: %+v, %d left; want %d deleted, none left", st, left(), n/2)
	}
}
