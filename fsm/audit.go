package fsm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/oidcd/oidcd/fsm/trail"
)

// The audit trail. An event is written by the apply of the command that
// does the action, in its bbolt transaction: no action commits without its
// event, no event exists without its action, and every replica writes the
// same events with the same seq and hash, because everything that goes
// into one comes from the command (the proposer's stamp: time, node,
// address) or from the state the apply sees.
//
// A proposer stamps a command with Stamp: the stamp is a field of the
// command envelope (Command.Audit), and FlagAudited tells apply to read
// it. On the wire it rides inside the JSON payload under "audit", where
// every version, older ones included, has always written and read it (a
// handler's payload type has no such field and ignores it). Apply then
// records the stamp's event when the command succeeds, or a failure with
// the error as reason when the stamp asks for it (FailOnError: a code
// replay commits a revocation and fails). Commands whose Result ends app
// sessions (EndedApps) also record one logout event per app session, and
// some commands derive events of their own (auditDerive: a lockout, a
// signing key). TypeAuditEvent is a command that only records its stamp:
// a failure that would otherwise commit nothing (a wrong password, whose
// attempt the throttle reservation already counted).

// Event types and outcomes (docs/operators/audit.md).
const (
	EventSignin     = "signin"
	EventToken      = "token"
	EventRevocation = "revocation"
	EventLogout     = "logout"
	EventAdmin      = "admin"
	EventKey        = "key"
	// EventAccount: a person changed their own account on /account
	// (detail.action: password-change, totp-remove, session-end, ...).
	EventAccount = "account"
	// The people's own way in (docs/operators/email.md): detail.action
	// says which step (sent, accepted, requested, completed, ...).
	EventInvitation    = "invitation"
	EventPasswordReset = "password_reset"
	EventVerifyEmail   = "verify_email"
	EventRegistration  = "registration"
	// EventIdentity: a link to an upstream provider was made or removed
	// (detail.action: linked, unlinked; detail.provider: its slug).
	EventIdentity = "identity"

	OutcomeSuccess = "success"
	OutcomeFailure = "failure"

	ActorPerson = "person"
	ActorClient = "client"
	ActorAdmin  = "admin"
	ActorSystem = "system"
)

// Event is one entry of the trail (package trail's: the trail lives in
// it from state format 3 on, and its hash is the same).
type Event = trail.Event

// Audit is a proposer's stamp: the event a command records, less what
// apply computes (seq, prev_hash, hash). A stamp without Type records no
// event of its own: it gives the node, time, address and actor of the
// events the command derives (the logouts of the sessions it ends).
type Audit struct {
	Type     string            `json:"type,omitempty"`
	Outcome  string            `json:"outcome,omitempty"` // empty: success
	Actor    string            `json:"actor"`
	Subject  string            `json:"subject,omitempty"`
	ClientID string            `json:"client_id,omitempty"`
	OrgID    string            `json:"organization_id,omitempty"`
	SID      string            `json:"sid,omitempty"`
	IP       string            `json:"ip,omitempty"`
	Node     string            `json:"node"`
	Time     time.Time         `json:"time"`
	Detail   map[string]string `json:"detail,omitempty"`
	// FailOnError records a failure, with the Result's error as
	// detail.reason, when the command fails; without it a failed command
	// records nothing (it did nothing).
	FailOnError bool `json:"fail_on_error,omitempty"`
}

// FlagAudited marks a command whose payload carries an Audit stamp.
const FlagAudited uint8 = 1 << 6

// Stamp returns cmd carrying the stamp a (Command.Audit) and
// FlagAudited. The payload is not decoded or re-encoded: it is only
// checked to be a JSON object (or null), into which Encode splices the
// stamp.
func Stamp(cmd Command, a Audit) (Command, error) {
	body := bytes.TrimSpace(cmd.Payload)
	if string(body) != "null" && (len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' || !json.Valid(body)) {
		return cmd, fmt.Errorf("fsm: stamp %s: the payload is not a JSON object", cmd.Type)
	}
	if y := a.Time.Year(); y < 0 || y > 9999 {
		// encoding/json refuses such a time (time.Time.MarshalJSON).
		return cmd, fmt.Errorf("fsm: stamp %s: time %v out of range", cmd.Type, a.Time)
	}
	if a.Detail != nil {
		// The stamp is encoded when the command is: a caller that
		// reuses its map after Stamp must not change this one.
		d := make(map[string]string, len(a.Detail))
		for k, v := range a.Detail {
			d[k] = v
		}
		a.Detail = d
	}
	cmd.Audit, cmd.Flags = &a, cmd.Flags|FlagAudited
	return cmd, nil
}

// MustStamp is Stamp for payloads built by NewCommand, which are objects.
func MustStamp(cmd Command, a Audit) Command {
	c, err := Stamp(cmd, a)
	if err != nil {
		panic(err)
	}
	return c
}

// AuditBase is what every stamp of one request (or one background task)
// shares: the node that takes it and the client's address (empty for the
// node's own work).
type AuditBase struct {
	Node string
	IP   string
	// Admin, when set, is the admin event of the API call whose write
	// another package proposes (a key rotation): that package stamps its
	// command with it (StampIn of a stamp without Type).
	Admin *Audit
}

type auditBaseKey struct{}

// WithAuditBase returns ctx carrying b (the node's HTTP middleware and its
// background tasks set it).
func WithAuditBase(ctx context.Context, b AuditBase) context.Context {
	return context.WithValue(ctx, auditBaseKey{}, b)
}

// AuditBaseFrom is the base ctx carries (zero when none).
func AuditBaseFrom(ctx context.Context) AuditBase {
	b, _ := ctx.Value(auditBaseKey{}).(AuditBase)
	return b
}

// StampIn stamps cmd with a, its node and address taken from ctx's base
// (when a leaves them empty) and its time from now.
//
// A stamp without Type (a command's events are all derived), in a request
// of the admin API, becomes that request's admin event.
func StampIn(ctx context.Context, cmd Command, now time.Time, a Audit) Command {
	b := AuditBaseFrom(ctx)
	if a.Type == "" && b.Admin != nil {
		a = *b.Admin
	}
	if a.Node == "" {
		a.Node = b.Node
	}
	if a.IP == "" && a.Actor != ActorSystem {
		a.IP = b.IP
	}
	if a.Time.IsZero() {
		a.Time = now
	}
	a.Time = a.Time.UTC()
	return MustStamp(cmd, a)
}

// AuditEvent is the command that only records its stamp.
type AuditEvent struct{}

func init() {
	register(TypeAuditEvent, func(*bolt.Tx, uint64, []byte) Result { return Result{} })
}

// NewAuditEvent is a TypeAuditEvent command stamped with a. A node that
// does not know the type skips it (FlagIgnorable): it loses an event, not
// its state.
func NewAuditEvent(a Audit) Command {
	c := MustStamp(MustCommand(TypeAuditEvent, AuditEvent{}), a)
	c.Flags |= FlagIgnorable
	return c
}

var (
	bucketAudit    = []byte("audit")       // seq (8 bytes, big-endian) -> Event
	bucketAuditIdx = []byte("audit_index") // kind, value, 0, seq -> ""
	keyAuditHead   = []byte("audit_head")  // seq (8 bytes) and hash (32 bytes) of the newest event
)

// Index kinds: the first byte of an audit_index key.
const (
	idxType    = 't'
	idxSubject = 's'
	idxClient  = 'c'
	idxOrg     = 'o'
)

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func idxKey(kind byte, value string, seq uint64) []byte {
	k := make([]byte, 0, 2+len(value)+8)
	k = append(k, kind)
	k = append(k, value...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// indexEntries are the index keys of e (values with a NUL byte are not
// indexed: no valid id or type has one).
func indexEntries(e *Event) [][]byte {
	var out [][]byte
	for _, kv := range []struct {
		kind  byte
		value string
	}{{idxType, e.Type}, {idxSubject, e.Subject}, {idxClient, e.ClientID}, {idxOrg, e.OrgID}} {
		if kv.value != "" && !strings.ContainsRune(kv.value, 0) {
			out = append(out, idxKey(kv.kind, kv.value, e.Seq))
		}
	}
	return out
}

// hashEnc is CBOR's core deterministic encoding (RFC 8949 section
// 4.2.1: shortest forms, map keys sorted), which makes the hashed bytes a
// function of the event's values alone.
var hashEnc = func() cbor.EncMode {
	opts := cbor.CoreDetEncOptions()
	opts.Time = cbor.TimeRFC3339Nano
	em, err := opts.EncMode()
	if err != nil {
		panic(err)
	}
	return em
}()

// EventHash is an event's hash: hex SHA-256 over the 32 bytes of
// prev_hash (none for the first event ever written) followed by the
// deterministic CBOR encoding (hashEnc) of the event with hash empty.
// Every field but hash is covered, seq and prev_hash included. It is
// trail.EventHash, which encodes without reflection.
func EventHash(e Event) (string, error) { return trail.EventHash(e) }

// auditHead is the seq and hash of the newest event (0 and "" before the
// first).
func auditHead(tx *bolt.Tx) (uint64, string) {
	v := tx.Bucket(bucketMeta).Get(keyAuditHead)
	if len(v) != 8+sha256.Size {
		return 0, ""
	}
	return binary.BigEndian.Uint64(v[:8]), hex.EncodeToString(v[8:])
}

// appendEvent gives e the next seq, chains it and stores it with its
// index entries; with the trail's layout (format 3), it stages it without
// index entries and records the time of a chunk's last event.
func appendEvent(tx *bolt.Tx, e Event, trailLayout bool) Event {
	seq, prev := auditHead(tx)
	e.Seq, e.PrevHash = seq+1, prev
	e.Time = e.Time.UTC()
	h, err := EventHash(e)
	if err != nil {
		panic(fmt.Sprintf("fsm: audit hash: %v", err))
	}
	e.Hash = h
	b, err := encodeRecord(e)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode event: %v", err))
	}
	staged := tx.Bucket(bucketAudit)
	// Seqs come in order, and bbolt's default split leaves a page half
	// full for keys that come at random: fill each page instead.
	staged.FillPercent = 1
	if err := staged.Put(seqKey(e.Seq), b); err != nil {
		panic(err)
	}
	if trailLayout {
		if e.Seq%trailChunk == 0 {
			putChunk(tx, &e)
		}
	} else {
		idx := tx.Bucket(bucketAuditIdx)
		for _, k := range indexEntries(&e) {
			if err := idx.Put(k, nil); err != nil {
				panic(err)
			}
		}
	}
	raw, _ := hex.DecodeString(h)
	if err := tx.Bucket(bucketMeta).Put(keyAuditHead, append(seqKey(e.Seq), raw...)); err != nil {
		panic(err)
	}
	return e
}

// auditDerive lists commands that decide their events from their payload,
// their result and the state. se is the stamp's event as the general rule
// makes it (nil when there is none, or the command failed and the stamp
// does not ask for a failure); the hook returns every event to record,
// se (completed) among them or not.
var auditDerive = map[Type]func(tx *bolt.Tx, payload []byte, res Result, stamp *Audit, se *Event) []Event{}

// eventFrom is the event of a stamp.
func eventFrom(a *Audit) Event {
	e := Event{Time: a.Time, Type: a.Type, Outcome: a.Outcome, Actor: a.Actor, Subject: a.Subject,
		ClientID: a.ClientID, OrgID: a.OrgID, SID: a.SID, IP: a.IP, Node: a.Node}
	if e.Outcome == "" {
		e.Outcome = OutcomeSuccess
	}
	if len(a.Detail) > 0 {
		e.Detail = make(map[string]string, len(a.Detail))
		for k, v := range a.Detail {
			e.Detail[k] = v
		}
	}
	return e
}

// systemEvent is an event of the node's own work, at t, with the stamp's
// node and actor when there is a stamp.
func systemEvent(stamp *Audit, t time.Time, typ string) Event {
	e := Event{Time: t, Type: typ, Outcome: OutcomeSuccess, Actor: ActorSystem}
	if stamp != nil {
		e.Node, e.Actor, e.IP = stamp.Node, stamp.Actor, stamp.IP
	}
	return e
}

// logoutEvents are the logout events of app sessions a command ended.
func logoutEvents(stamp *Audit, apps []AppSession) []Event {
	var out []Event
	for _, a := range apps {
		e := systemEvent(stamp, a.EndedAt, EventLogout)
		e.Subject, e.ClientID, e.OrgID, e.SID = a.UserID, a.ClientID, a.OrgID, a.ID
		e.Detail = map[string]string{"cause": a.EndReason}
		out = append(out, e)
	}
	return out
}

// recordID is the id of the record a command wrote, when its Result says.
func recordID(v any) string {
	switch r := v.(type) {
	case Org:
		return r.ID
	case User:
		return r.ID
	case Client:
		return r.ID
	case Membership:
		return r.ID
	case Key:
		return r.Kid
	case Directory:
		return r.ID
	case AdminGrant:
		return r.ID
	case APIKey:
		return r.ID
	case Invitation:
		return r.ID
	case IdentityProvider:
		return r.ID
	}
	return ""
}

// errReason is the reason a failed command's event gives.
func errReason(err error) string {
	var nf *NotFoundError
	var ce *ConflictError
	switch {
	case errors.As(err, &nf):
		return "not_found: " + nf.Field
	case errors.As(err, &ce):
		return "conflict: " + ce.Field
	}
	return err.Error()
}

// stamp is the proposer's stamp of cmd: Audit when set (a command not
// yet encoded), else, when FlagAudited says there is one, the payload's
// "audit" member, where every version writes it on the wire (a decoded
// entry, whichever version proposed it).
func (cmd Command) stamp() *Audit {
	if cmd.Audit != nil {
		return cmd.Audit
	}
	if cmd.Flags&FlagAudited == 0 {
		return nil
	}
	var p struct {
		Audit *Audit `json:"audit"`
	}
	if err := json.Unmarshal(cmd.Payload, &p); err != nil {
		panic(fmt.Sprintf("fsm: decode audit stamp: %v", err))
	}
	return p.Audit
}

// auditApply records the events of one applied command; it returns their
// types (for metrics).
func auditApply(tx *bolt.Tx, cmd Command, res Result) []string {
	stamp := cmd.stamp()
	var se *Event
	if stamp != nil && stamp.Type != "" {
		switch {
		case res.Err == nil:
			e := eventFrom(stamp)
			se = &e
		case stamp.FailOnError:
			e := eventFrom(stamp)
			e.Outcome = OutcomeFailure
			if e.Detail == nil {
				e.Detail = map[string]string{}
			}
			e.Detail["reason"] = errReason(res.Err)
			se = &e
		}
	}
	if se != nil && se.Type == EventAdmin && se.Detail["target"] == "" {
		if id := recordID(res.Value); id != "" {
			if se.Detail == nil {
				se.Detail = map[string]string{}
			}
			se.Detail["target"] = id
		}
	}
	var events []Event
	if d := auditDerive[cmd.Type]; d != nil {
		events = d(tx, cmd.Payload, res, stamp, se)
	} else if se != nil {
		events = append(events, *se)
	}
	if used, ok := res.Value.(LinkUsed); ok {
		res.Value = used.Ended
	}
	if ended, ok := res.Value.(EndedApps); ok {
		events = append(events, logoutEvents(stamp, ended.Apps)...)
	}
	if len(events) == 0 {
		return nil
	}
	types := make([]string, len(events))
	layout := trailLayout(tx)
	for i, e := range events {
		appendEvent(tx, e, layout)
		types[i] = e.Type
	}
	return types
}

// pruneAudit deletes at most max events older than before, oldest first;
// the chain goes on from the oldest event kept, whose prev_hash stays.
func pruneAudit(tx *bolt.Tx, before time.Time, max int) int {
	b, idx := tx.Bucket(bucketAudit), tx.Bucket(bucketAuditIdx)
	var dead []Event
	c := b.Cursor()
	for k, v := c.First(); k != nil && len(dead) < max; k, v = c.Next() {
		var e Event
		if err := decodeRecord(v, &e); err != nil {
			break // an altered event: verify names it; pruning stops there
		}
		if !e.Time.Before(before) {
			break
		}
		dead = append(dead, e)
	}
	for _, e := range dead {
		if err := b.Delete(seqKey(e.Seq)); err != nil {
			panic(err)
		}
		for _, k := range indexEntries(&e) {
			if err := idx.Delete(k); err != nil {
				panic(err)
			}
		}
	}
	return len(dead)
}
