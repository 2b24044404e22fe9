package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// previousStamp is Stamp as the previous version wrote it: the payload
// decoded into a map, the stamp added under "audit", the map encoded
// again. Kept to show that the stamp in the envelope puts on the wire
// what that version put there, to the byte of every member.
func previousStamp(cmd Command, a Audit) (Command, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cmd.Payload, &m); err != nil {
		return cmd, err
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return cmd, err
	}
	m["audit"] = b
	p, err := json.Marshal(m)
	if err != nil {
		return cmd, err
	}
	cmd.Payload, cmd.Flags = p, cmd.Flags|FlagAudited
	return cmd, nil
}

// compatStamps stamps the fuzz seeds' world (a small world built, used
// and torn down) in turn with an admin event whose detail needs escaping,
// a derived-only stamp, a failure-asking stamp and none.
func compatStamps(t *testing.T) (cmds []Command, stamps []*Audit) {
	t.Helper()
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	for i, wire := range fuzzSeeds() {
		cmd, err := Decode(wire)
		if err != nil || handlers[cmd.Type] == nil {
			continue
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(cmd.Payload, &probe) != nil {
			continue // not an object: neither version stamps it
		}
		var a *Audit
		switch i % 4 {
		case 0:
			a = &Audit{Type: EventAdmin, Actor: ActorAdmin, Node: "node-0", IP: "192.0.2.7", Time: at,
				Detail: map[string]string{"action": "x<y>&\"z\"", "é": "\u2028"}}
		case 1:
			a = &Audit{Actor: ActorSystem, Node: "node-1", Time: at}
		case 2:
			a = &Audit{Type: EventToken, Actor: ActorClient, ClientID: "app", Node: "node-2", Time: at, FailOnError: true}
		}
		cmds, stamps = append(cmds, cmd), append(stamps, a)
	}
	return cmds, stamps
}

// TestStampOnTheWireIsThePreviousVersions: a command stamped through the
// envelope encodes to the previous version's wire form up to the order
// of the payload's members: same type, same flags, the same members with
// the same bytes. A decoder of either version (apply's handlers decode
// into structs, the stamp is read as the member "audit") sees the same
// command, and the entry re-encodes to itself.
func TestStampOnTheWireIsThePreviousVersions(t *testing.T) {
	cmds, stamps := compatStamps(t)
	for i, cmd := range cmds {
		a := stamps[i]
		if a == nil {
			continue
		}
		old, err := previousStamp(cmd, *a)
		if err != nil {
			t.Fatal(err)
		}
		ow, nw := old.Encode(), MustStamp(cmd, *a).Encode()
		if ow[0] != nw[0] || ow[1] != nw[1] {
			t.Errorf("%s: envelope %x %x, previous %x %x", cmd.Type, nw[0], nw[1], ow[0], ow[1])
		}
		var om, nm map[string]json.RawMessage
		if err := json.Unmarshal(ow[2:], &om); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(nw[2:], &nm); err != nil {
			t.Fatalf("%s: the new wire form is not JSON: %v\n%s", cmd.Type, err, nw[2:])
		}
		if !reflect.DeepEqual(om, nm) {
			t.Errorf("%s: members differ\nprevious %s\nnow      %s", cmd.Type, ow[2:], nw[2:])
		}
		dec, err := Decode(nw)
		if err != nil || !bytes.Equal(dec.Encode(), nw) {
			t.Errorf("%s: Encode(Decode(wire)) differs (%v)", cmd.Type, err)
		}
		if got := dec.stamp(); !reflect.DeepEqual(got, a) {
			t.Errorf("%s: stamp read back %+v, want %+v", cmd.Type, got, a)
		}
	}
}

// TestStampedEntriesOfEitherVersionApplyAlike: the same commands applied
// as the previous version wrote them, as this one writes them, and mixed
// (a rolling upgrade: a log holding both, in turn) give the same state
// and the same audit trail, event for event, hash for hash. Run under
// this version's apply, it stands for both directions: the wire forms
// carry the same members (TestStampOnTheWireIsThePreviousVersions), and
// the previous version's apply reads members as this one does.
func TestStampedEntriesOfEitherVersionApplyAlike(t *testing.T) {
	cmds, stamps := compatStamps(t)
	run := func(name string, previous func(i int) bool) (string, []Event) {
		f, err := Open(filepath.Join(t.TempDir(), name+".db"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i, cmd := range cmds {
			c := cmd
			if a := stamps[i]; a != nil {
				if previous(i) {
					if c, err = previousStamp(cmd, *a); err != nil {
						t.Fatal(err)
					}
				} else {
					c = MustStamp(cmd, *a)
				}
			}
			f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c.Encode()})
		}
		// A stored event's detail is a map, encoded in Go's map order:
		// its bytes differ from run to run in either version. The events
		// are compared decoded, below, their hashes (over the
		// deterministic encoding) included.
		digest, _ := stateDigest(t, f, string(bucketAudit))
		events, err := f.State().AuditEvents(AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return digest, events
	}
	oldDigest, oldEvents := run("previous", func(int) bool { return true })
	if len(oldEvents) < 3 {
		t.Fatalf("only %d events: the world records too little to compare", len(oldEvents))
	}
	for name, previous := range map[string]func(int) bool{
		"this version": func(int) bool { return false },
		"mixed":        func(i int) bool { return i%2 == 0 },
		"mixed, other": func(i int) bool { return i%2 == 1 },
	} {
		digest, events := run(fmt.Sprint(len(name)), previous)
		if digest != oldDigest {
			t.Errorf("%s: state differs from the previous version's", name)
		}
		if !reflect.DeepEqual(events, oldEvents) {
			t.Errorf("%s: audit trail differs\ngot  %+v\nwant %+v", name, events, oldEvents)
		}
	}
}

// TestStampKeepsItsDetail: the stamp is encoded when the command is, from
// a copy: a caller that reuses its detail map after Stamp does not change
// the command. Stamp refuses what the previous version refused.
func TestStampKeepsItsDetail(t *testing.T) {
	d := map[string]string{"jti": "1"}
	cmd := MustStamp(MustCommand(TypeRevokeToken, RevokeToken{JTI: "1", ExpiresAt: t0}), Audit{Type: EventRevocation, Actor: ActorClient, Time: t0, Detail: d})
	d["jti"] = "2"
	if got := cmd.Audit.Detail["jti"]; got != "1" {
		t.Errorf("detail changed with the caller's map: %q", got)
	}
	if !bytes.Contains(cmd.Encode(), []byte(`"detail":{"jti":"1"}`)) {
		t.Errorf("wire form %s", cmd.Encode())
	}
	for _, payload := range []string{"[]", `"x"`, "not json", "{", ""} {
		if _, err := Stamp(Command{Type: TypeNoop, Payload: []byte(payload)}, Audit{Time: t0}); err == nil {
			t.Errorf("Stamp of payload %q: no error", payload)
		}
	}
	if _, err := Stamp(MustCommand(TypeNoop, struct{}{}), Audit{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("Stamp of a time encoding/json refuses: no error")
	}
	ev := Audit{Type: EventSignin, Outcome: OutcomeFailure, Actor: ActorPerson, Subject: "u1", Time: t0, Detail: map[string]string{"reason": "wrong_password"}}
	prev, _ := previousStamp(MustCommand(TypeAuditEvent, AuditEvent{}), ev)
	prev.Flags |= FlagIgnorable
	if got, want := NewAuditEvent(ev).Encode(), prev.Encode(); !bytes.Equal(got, want) {
		t.Errorf("NewAuditEvent: %s, previous %s", got, want)
	}
	null, err := Stamp(Command{Type: TypeAuditEvent, Payload: []byte("null")}, Audit{Type: EventAdmin, Time: t0})
	old, _ := previousStamp(Command{Type: TypeAuditEvent, Payload: []byte("null")}, Audit{Type: EventAdmin, Time: t0})
	if err != nil || !bytes.Equal(null.Encode(), old.Encode()) {
		t.Errorf("null payload: %s (%v), previous %s", null.Encode(), err, old.Encode())
	}
}

// BenchmarkStamp: stamping a token exchange's command and encoding it for
// raft, through the envelope (the payload untouched, the stamp spliced in
// by Encode) and as the previous version did (the payload decoded into a
// map and encoded again).
func BenchmarkStamp(b *testing.B) {
	cmd := MustCommand(TypeRedeemCode, RedeemCode{Hash: "3f1c0c4c7a7e6c1d1b0f4f0d5a8f2b9e8c6d4a2b1f0e9d8c7b6a5f4e3d2c1b0a", ClientID: "app",
		At: t0, AccessJTI: "6f1f7c1e-7e0c-4a1f-9d5e-3c2b1a0f9e8d", AccessExpires: t0.Add(10 * time.Minute)})
	a := Audit{Type: EventToken, Actor: ActorClient, ClientID: "app", Node: "node-0", IP: "192.0.2.7", Time: t0, FailOnError: true,
		Detail: map[string]string{"grant_type": "authorization_code"}}
	b.Run("envelope", func(b *testing.B) {
		for b.Loop() {
			MustStamp(cmd, a).Encode()
		}
	})
	b.Run("previous", func(b *testing.B) {
		for b.Loop() {
			c, _ := previousStamp(cmd, a)
			c.Encode()
		}
	})
}
