package fsm

import (
	"encoding/binary"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// applyStamped applies cmd stamped with a.
func (h *harness) applyStamped(typ Type, v any, a Audit) Result {
	h.t.Helper()
	h.index++
	cmd := MustStamp(MustCommand(typ, v), a)
	return h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: cmd.Encode()}).(Result)
}

func (h *harness) events(q AuditQuery) []Event {
	h.t.Helper()
	es, err := h.f.State().AuditEvents(q)
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

func (h *harness) lastEvent() Event {
	h.t.Helper()
	es := h.events(AuditQuery{})
	if len(es) == 0 {
		h.t.Fatal("no events")
	}
	return es[len(es)-1]
}

func admin(action string) Audit {
	return Audit{Type: EventAdmin, Actor: ActorAdmin, Node: "n1", IP: "192.0.2.7", Time: t0, Detail: map[string]string{"action": action}}
}

// TestAuditEventsComeFromTheApply: a stamped command that succeeds records
// its event, with the target filled in from the record written; one that
// fails records nothing unless its stamp asks for the failure; the seqs
// are consecutive and chained, and verify agrees.
func TestAuditEventsComeFromTheApply(t *testing.T) {
	h := newHarness(t)
	h.applyStamped(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0}, admin("POST /organizations"))
	if r := h.applyStamped(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "alpha", Name: "Dup", CreatedAt: t0}, admin("POST /organizations")); r.Err == nil {
		t.Fatal("a duplicate slug was accepted")
	}
	h.apply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "beta", Name: "Beta", CreatedAt: t0}) // not stamped: no event
	es := h.events(AuditQuery{})
	if len(es) != 1 {
		t.Fatalf("events: %+v, want the one successful admin write", es)
	}
	e := es[0]
	want := Event{Seq: 1, Time: t0, Type: EventAdmin, Outcome: OutcomeSuccess, Actor: ActorAdmin, IP: "192.0.2.7", Node: "n1",
		Detail: map[string]string{"action": "POST /organizations", "target": orgA}, PrevHash: "", Hash: e.Hash}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("event:\n got %+v\nwant %+v", e, want)
	}
	// A failure that commits (a token request's code) records it.
	tok := Audit{Type: EventToken, Actor: ActorClient, ClientID: "app", Node: "n2", Time: t0, FailOnError: true}
	h.applyStamped(TypeRedeemCode, RedeemCode{Hash: "nope", ClientID: "app", At: t0}, tok)
	e = h.lastEvent()
	if e.Seq != 2 || e.Outcome != OutcomeFailure || e.Detail["reason"] != ErrNotFound.Error() || e.PrevHash != es[0].Hash {
		t.Fatalf("failure event: %+v", e)
	}
	v, err := h.f.State().VerifyAudit()
	if err != nil || !v.OK || v.Count != 2 || v.FirstSeq != 1 || v.LastSeq != 2 || v.HeadHash != e.Hash {
		t.Fatalf("verify: %+v %v", v, err)
	}
}

// TestAuditHashIsDocumented: hash is SHA-256 over prev_hash's bytes and the
// deterministic CBOR of the event without its hash, so an outside
// verifier can recompute it; every field changes it.
func TestAuditHashIsDocumented(t *testing.T) {
	e := Event{Seq: 7, Time: t0, Type: EventSignin, Outcome: OutcomeSuccess, Actor: ActorPerson, Subject: userA, Node: "n1",
		Detail: map[string]string{"b": "2", "a": "1"}, PrevHash: strings.Repeat("ab", 32)}
	h1, err := EventHash(e)
	if err != nil || len(h1) != 64 {
		t.Fatalf("hash %q %v", h1, err)
	}
	for name, change := range map[string]func(*Event){
		"seq": func(e *Event) { e.Seq++ }, "time": func(e *Event) { e.Time = e.Time.Add(time.Nanosecond) },
		"subject": func(e *Event) { e.Subject = userB }, "detail": func(e *Event) { e.Detail = map[string]string{"a": "1"} },
		"prev_hash": func(e *Event) { e.PrevHash = strings.Repeat("ac", 32) }, "ip": func(e *Event) { e.IP = "192.0.2.1" },
	} {
		c := e
		change(&c)
		if h2, _ := EventHash(c); h2 == h1 {
			t.Errorf("changing %s leaves the hash", name)
		}
	}
	e.Hash = "anything"
	if h2, _ := EventHash(e); h2 != h1 {
		t.Error("the hash covers itself")
	}
}

// TestAuditReplayLockoutAndLogouts: a code replay names the session whose
// token it revoked; a reservation records a lockout once, when it locks,
// and nothing for the attempts refused after; ending a session records a
// logout per app session with its cause.
func TestAuditReplayLockoutAndLogouts(t *testing.T) {
	h := signedIn(t)
	issue(h, "c1", orgA, "sid-1", t0)
	tok := Audit{Type: EventToken, Actor: ActorClient, ClientID: "app", Node: "n1", Time: t0, FailOnError: true}
	h.applyStamped(TypeRedeemCode, RedeemCode{Hash: "c1", ClientID: "app", At: t0, AccessJTI: "j1", AccessExpires: t0.Add(time.Hour)}, tok)
	if e := h.lastEvent(); e.Outcome != OutcomeSuccess || e.Subject != userA || e.SID != "sid-1" || e.OrgID != orgA {
		t.Fatalf("exchange: %+v", e)
	}
	h.applyStamped(TypeRedeemCode, RedeemCode{Hash: "c1", ClientID: "app", At: t0, AccessJTI: "j2", AccessExpires: t0.Add(time.Hour)}, tok)
	if e := h.lastEvent(); e.Outcome != OutcomeFailure || e.Detail["reason"] != "replay" || e.Detail["revoked_jti"] != "j1" || e.SID != "sid-1" || e.Subject != userA {
		t.Fatalf("replay: %+v", e)
	}

	lock := Audit{Type: EventSignin, Outcome: OutcomeFailure, Actor: ActorPerson, Subject: userA, Node: "n1", Time: t0}
	rule := ThrottleRule{Key: "pwd:x", Limit: 3, Window: time.Minute, Lockout: time.Hour}
	before := h.lastEvent().Seq
	for range 6 {
		h.applyStamped(TypeThrottleReserve, ThrottleReserve{Rules: []ThrottleRule{rule}, At: t0}, lock)
	}
	lockouts := h.events(AuditQuery{After: before})
	if len(lockouts) != 1 || lockouts[0].Detail["reason"] != "lockout" || lockouts[0].Subject != userA {
		t.Fatalf("six attempts against a limit of three: %+v, want one lockout event", lockouts)
	}

	h.applyStamped(TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0.Add(time.Minute), Reason: EndLogout}, Audit{Actor: ActorPerson, Node: "n3", IP: "192.0.2.9", Time: t0})
	e := h.lastEvent()
	if e.Type != EventLogout || e.SID != "sid-1" || e.Subject != userA || e.ClientID != "app" || e.Detail["cause"] != EndLogout ||
		e.Node != "n3" || e.IP != "192.0.2.9" || e.Actor != ActorPerson || !e.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("logout: %+v", e)
	}
	if v, _ := h.f.State().VerifyAudit(); !v.OK {
		t.Fatalf("verify: %+v", v)
	}
}

// TestAuditFilters: each filter reads its index and returns only matching
// events, in seq order from after on.
func TestAuditFilters(t *testing.T) {
	h := newHarness(t)
	for i := range 30 {
		a := Audit{Type: EventSignin, Actor: ActorPerson, Subject: []string{userA, userB}[i%2], ClientID: []string{"app", "other", "third"}[i%3], Node: "n1", Time: t0}
		h.f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: NewAuditEvent(a).Encode()})
	}
	h.index = 30
	h.applyStamped(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0}, admin("POST /organizations"))
	for _, tt := range []struct {
		name string
		q    AuditQuery
		want []uint64
	}{
		{"page", AuditQuery{After: 28, Limit: 2}, []uint64{29, 30}},
		{"subject", AuditQuery{Subject: userB, Limit: 3}, []uint64{2, 4, 6}},
		{"subject after", AuditQuery{Subject: userB, After: 25, Limit: 10}, []uint64{26, 28, 30}},
		{"client and subject", AuditQuery{Subject: userA, ClientID: "app", Limit: 10}, []uint64{1, 7, 13, 19, 25}},
		{"type", AuditQuery{Type: EventAdmin}, []uint64{31}},
		{"organization", AuditQuery{OrgID: orgA}, nil},
		{"nothing after the head", AuditQuery{After: 31}, nil},
		{"newest of a subject", AuditQuery{Subject: userB, Newest: true, Limit: 2}, []uint64{30, 28}},
		{"newest before a seq", AuditQuery{Subject: userB, Newest: true, After: 28, Limit: 2}, []uint64{26, 24}},
		{"newest of the last index", AuditQuery{Type: EventSignin, Newest: true, Limit: 2}, []uint64{30, 29}},
		{"newest of all", AuditQuery{Newest: true, Limit: 2}, []uint64{31, 30}},
		{"newest of all before a seq", AuditQuery{Newest: true, After: 3, Limit: 5}, []uint64{2, 1}},
		{"newest before a seq past the head", AuditQuery{Newest: true, After: 100, Limit: 2}, []uint64{31, 30}},
		{"newest of a subject before a seq past the head", AuditQuery{Subject: userB, Newest: true, After: 100, Limit: 1}, []uint64{30}},
		{"newest with a second filter", AuditQuery{Subject: userA, ClientID: "app", Newest: true, Limit: 2}, []uint64{25, 19}},
	} {
		var got []uint64
		for _, e := range h.events(tt.q) {
			got = append(got, e.Seq)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestAuditRetention: the reap prunes events older than its cutoff, at
// most a batch at a time, oldest first; the chain goes on from the oldest
// kept, and verify still passes.
func TestAuditRetention(t *testing.T) {
	h := newHarness(t)
	for i := range 12 {
		a := Audit{Type: EventSignin, Actor: ActorPerson, Subject: userA, Node: "n1", Time: t0.Add(time.Duration(i) * time.Hour)}
		h.index++
		h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: NewAuditEvent(a).Encode()})
	}
	// A batch bounds one prune, oldest first.
	var n int
	if err := h.f.db.Update(func(tx *bolt.Tx) error { n = pruneAudit(tx, t0.Add(5*time.Hour+time.Minute), 2); return nil }); err != nil || n != 2 {
		t.Fatalf("a prune of at most 2: %d %v", n, err)
	}
	// A reap with only an audit cutoff (the node's backlog rounds) prunes
	// the rest and reaps nothing else.
	st := h.mustApply(TypeReap, Reap{AuditBefore: t0.Add(5*time.Hour + time.Minute)}).Value.(ReapStats)
	if st.AuditEvents != 4 {
		t.Fatalf("pruned %d, want the 4 left", st.AuditEvents)
	}
	v, _ := h.f.State().VerifyAudit()
	if !v.OK || v.FirstSeq != 7 || v.LastSeq != 12 || v.Count != 6 {
		t.Fatalf("verify after pruning: %+v", v)
	}
	if es := h.events(AuditQuery{Subject: userA}); len(es) != 6 || es[0].Seq != 7 || es[0].PrevHash == "" {
		t.Fatalf("kept events: %d, first %+v", len(es), es[0])
	}
	h.index++
	h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: NewAuditEvent(Audit{Type: EventSignin, Actor: ActorPerson, Node: "n1", Time: t0}).Encode()})
	if e := h.lastEvent(); e.Seq != 13 {
		t.Fatalf("next seq after pruning: %d", e.Seq)
	}
	if st, _ := h.f.State().AuditStats(); st.Events != 7 || st.HeadSeq != 13 || st.Bytes <= 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// TestAuditTamperIsNamed: one byte of a stored event changed with bbolt's
// API (the node stopped) makes verify name that event's seq; an event
// removed from the middle is named by the one after it. (Removing the
// oldest events looks like retention: the heads and first seqs that
// oidcd admin audit verify compares across nodes show that.)
func TestAuditTamperIsNamed(t *testing.T) {
	build := func() string {
		path := filepath.Join(t.TempDir(), "state.db")
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, f: f}
		for i, id := range []string{orgA, orgB, userA, userB, memA} {
			h.applyStamped(TypeCreateOrg, CreateOrg{ID: id, Slug: string(rune('a' + i)), CreatedAt: t0}, admin("POST /organizations"))
		}
		f.Close()
		return path
	}
	edit := func(path string, change func(b *bolt.Bucket) error) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { return change(tx.Bucket(bucketAudit)) }); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	verify := func(path string) AuditVerification {
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		v, err := f.State().VerifyAudit()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	seq := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

	path := build()
	if v := verify(path); !v.OK || v.Count != 5 {
		t.Fatalf("before: %+v", v)
	}
	edit(path, func(b *bolt.Bucket) error {
		v := append([]byte(nil), b.Get(seq(3))...)
		i := strings.Index(string(v), userA) // the target, in the detail
		if i < 0 {
			t.Fatal("the target is not in the stored event")
		}
		v[i] ^= 0x01
		return b.Put(seq(3), v)
	})
	if v := verify(path); v.OK || v.BrokenAt == nil || *v.BrokenAt != 3 {
		t.Fatalf("a byte of event 3 changed: %+v, want broken_at 3", v)
	}

	path = build()
	edit(path, func(b *bolt.Bucket) error { return b.Delete(seq(3)) })
	if v := verify(path); v.OK || v.BrokenAt == nil || *v.BrokenAt != 4 {
		t.Fatalf("event 3 removed: %+v, want broken_at 4", v)
	}

	path = build()
	edit(path, func(b *bolt.Bucket) error { return b.Delete(seq(5)) })
	if v := verify(path); v.OK || v.BrokenAt == nil || *v.BrokenAt != 4 {
		t.Fatalf("the newest event removed: %+v, want the head named at 4", v)
	}
}

// BenchmarkApplyRevokeToken: one revocation proposed and applied, plain
// and stamped with its audit event: the cost of the stamp's encoding and
// of the event's hash, chain and index writes on the apply path (one
// bbolt transaction per apply, as with a single write in flight).
func BenchmarkApplyRevokeToken(b *testing.B) {
	for _, stamped := range []bool{false, true} {
		b.Run(map[bool]string{false: "no-trail", true: "trail"}[stamped], func(b *testing.B) {
			f, err := Open(filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			a := Audit{Type: EventRevocation, Actor: ActorClient, ClientID: "app", Node: "node-0", IP: "192.0.2.7", Time: t0}
			b.ResetTimer()
			for i := range b.N {
				jti := strconv.Itoa(i)
				cmd := MustCommand(TypeRevokeToken, RevokeToken{JTI: jti, ExpiresAt: t0.Add(time.Hour)})
				if stamped {
					a.Detail = map[string]string{"jti": jti}
					cmd = MustStamp(cmd, a)
				}
				f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: cmd.Encode()})
			}
		})
	}
}
