package trail_test

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/fsm/trail"
)

// fsmEvent is e as fsm.Event (the same fields, before fsm aliases it).
func fsmEvent(e trail.Event) fsm.Event {
	return fsm.Event{Seq: e.Seq, Time: e.Time, Type: e.Type, Outcome: e.Outcome, Actor: e.Actor,
		Subject: e.Subject, ClientID: e.ClientID, OrgID: e.OrgID, SID: e.SID, IP: e.IP, Node: e.Node,
		Detail: fsm.EventDetail(e.Detail), PrevHash: e.PrevHash, Hash: e.Hash}
}

// TestEventHashIsFSMs: the reflection-free hash is fsm.EventHash, on
// hand-picked edge cases and on random events.
func TestEventHashIsFSMs(t *testing.T) {
	prev := strings.Repeat("ab", 32)
	cases := []struct {
		name string
		e    trail.Event
	}{
		{"zero event", trail.Event{}},
		{"zero time", trail.Event{Seq: 7, Type: "signin", PrevHash: prev}},
		{"utc nanos", trail.Event{Seq: 1 << 40, Time: time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC), Type: "token", Outcome: "success", Actor: "client", Node: "n1", PrevHash: prev}},
		{"offset zone", trail.Event{Seq: 2, Time: time.Date(2025, 3, 4, 5, 6, 7, 100, time.FixedZone("X", -(5*3600+30*60))), Node: "n2"}},
		{"all fields", trail.Event{Seq: 300, Time: time.Unix(1700000000, 0).UTC(), Type: "admin", Outcome: "failure", Actor: "admin",
			Subject: "8b0c2f7e-3a51-4c1e-9d5e-2f1c6b7a8e90", ClientID: "app-12", OrgID: "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9",
			SID: "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq83", IP: "2001:db8::1", Node: "n3",
			Detail: trail.EventDetail{"action": "POST /clients", "target": "x", "a": "", "credential": `{"kind":"token"}`}, PrevHash: prev}},
		{"empty detail map", trail.Event{Seq: 3, Detail: trail.EventDetail{}, PrevHash: prev}},
		{"unicode and bytes", trail.Event{Seq: 4, Subject: "ünïcødé ✓", Detail: trail.EventDetail{"ключ": "значение", "\xff": "\x00\xfe"}, PrevHash: prev}},
		{"long strings", trail.Event{Seq: 5, Subject: strings.Repeat("s", 300), Detail: trail.EventDetail{strings.Repeat("k", 30): strings.Repeat("v", 70000)}}},
		{"hash set is ignored", trail.Event{Seq: 6, Hash: "deadbeef", PrevHash: strings.ToUpper(prev)}},
		{"year 1", trail.Event{Seq: 8, Time: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { sameHash(t, c.e) })
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		sameHash(t, randomEvent(r, uint64(i), prev))
	}
}

func sameHash(t *testing.T, e trail.Event) {
	t.Helper()
	got, err := trail.EventHash(e)
	want, werr := fsm.EventHash(fsmEvent(e))
	if (err != nil) != (werr != nil) || got != want {
		t.Fatalf("event %+v: trail %q, %v; fsm %q, %v", e, got, err, want, werr)
	}
}

func TestEventHashBadPrev(t *testing.T) {
	if _, err := trail.EventHash(trail.Event{PrevHash: "xyz"}); err == nil {
		t.Fatal("a prev_hash that is not hex hashed")
	}
}
