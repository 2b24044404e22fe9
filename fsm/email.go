package fsm

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// The replicated outbox. A message to a person is a record here before
// anything is sent: the command that makes it (an invitation, a reset
// link, an address change) commits it in the same apply, so an
// acknowledged request always has its message on record. The leader
// delivers pending messages (package email) and records each attempt with
// EmailOutcome; what is pending when leadership moves is sent by the next
// leader. Delivery is at least once.
//
// The message itself (subject, text, HTML, link) is Body: bytes the
// proposer sealed under the operator's key-encryption key (internal/kek),
// so the raft log, the state file and snapshots do not hold a link's
// token in the clear when --kek-file is given. Body is dropped once the
// message is sent or has failed for good; the record that stays says only
// to whom, what kind, when and how it went.

// Kinds of messages.
const (
	EmailInvitation    = "invitation"
	EmailVerify        = "verify_email"
	EmailPasswordReset = "password_reset"
	EmailChanged       = "email_changed"
	EmailRegistration  = "registration"
)

// EmailKinds are the kinds a message may have.
//
// A password_reset message sent to a person of a directory tells them to
// change it there and holds no link; a registration message sent to an
// address that has an account points to the reset instead. The kind says
// why a message was sent, its body what it says.
var EmailKinds = []string{EmailInvitation, EmailVerify, EmailPasswordReset, EmailChanged, EmailRegistration}

// Email states.
const (
	EmailPending = "pending"
	EmailSent    = "sent"
	EmailFailed  = "failed"
)

// MaxEmailBody bounds an OutgoingEmail's Body.
const MaxEmailBody = 64 << 10

// MaxEmailError bounds an Email's LastError, in bytes: a longer error is
// cut at the last whole character before it.
const MaxEmailError = 512

// OutgoingEmail is a message a command asks to send.
type OutgoingEmail struct {
	To     string `json:"to"`
	Kind   string `json:"kind"`
	Locale string `json:"locale,omitempty"`
	UserID string `json:"user_id,omitempty"` // the person it concerns, when there is one
	Body   []byte `json:"body"`              // sealed by the proposer; opaque here
}

// Email is one message in the outbox.
type Email struct {
	// ID is "<raft index, 20 digits>-<seq, 4 digits>": unique, ordered by
	// creation, and the same on every node.
	ID            string    `json:"id" cbor:"1,keyasint"`
	To            string    `json:"to" cbor:"2,keyasint"`
	Kind          string    `json:"kind" cbor:"3,keyasint"`
	Locale        string    `json:"locale,omitempty" cbor:"4,keyasint,omitempty"`
	UserID        string    `json:"user_id,omitempty" cbor:"5,keyasint,omitempty"`
	Body          []byte    `json:"body,omitempty" cbor:"6,keyasint,omitempty"` // nil once final
	CreatedAt     time.Time `json:"created_at" cbor:"7,keyasint"`
	State         string    `json:"state" cbor:"8,keyasint"`
	Attempts      int       `json:"attempts" cbor:"9,keyasint"`
	NextAttemptAt time.Time `json:"next_attempt_at" cbor:"10,keyasint"`
	LastError     string    `json:"last_error,omitempty" cbor:"11,keyasint,omitempty"`
	DoneAt        time.Time `json:"done_at,omitzero" cbor:"12,keyasint,omitzero"`
}

// EnqueueEmail commits messages to the outbox. Value: []Email.
type EnqueueEmail struct {
	Emails []OutgoingEmail `json:"emails"`
	At     time.Time       `json:"at"`
}

// EmailOutcome records the results of delivery attempts (the leader
// batches several). State pending with a NextAttemptAt schedules a retry;
// sent and failed are final and drop the body.
type EmailOutcome struct {
	Outcomes []Outcome `json:"outcomes"`
}

func init() {
	register(TypeEnqueueEmail, applyEnqueueEmail)
	register(TypeEmailOutcome, applyEmailOutcome)
	// A message is reaped once sent or failed; a pending one stays until
	// it is.
	reaps(expiring(bucketEmails, func(st *ReapStats) *int { return &st.Emails }, func(e *Email, before time.Time) bool {
		return e.State != EmailPending && !e.DoneAt.After(before)
	}))
}

// validOutgoing checks the messages a command carries.
func validOutgoing(es []OutgoingEmail) bool {
	if len(es) > 8 {
		return false
	}
	for _, e := range es {
		if !validKey(e.To) || len(e.To) > 320 || !validEmailKind(e.Kind) || len(e.Locale) > 35 || len(e.Body) == 0 || len(e.Body) > MaxEmailBody {
			return false
		}
		if e.UserID != "" && !validID(e.UserID) {
			return false
		}
	}
	return true
}

func validEmailKind(k string) bool {
	for _, have := range EmailKinds {
		if k == have {
			return true
		}
	}
	return false
}

// enqueueEmails records es as pending messages of the command at index,
// numbered from seq.
func enqueueEmails(tx *bolt.Tx, index uint64, seq int, at time.Time, es []OutgoingEmail) []Email {
	out := make([]Email, 0, len(es))
	for i, o := range es {
		e := Email{
			ID: fmt.Sprintf("%020d-%04d", index, seq+i), To: o.To, Kind: o.Kind, Locale: o.Locale, UserID: o.UserID,
			Body: o.Body, CreatedAt: at, State: EmailPending, NextAttemptAt: at,
		}
		put(tx, bucketEmails, e.ID, e)
		putIndex(tx, bucketEmailsPending, e.ID, "")
		out = append(out, e)
	}
	return out
}

func applyEnqueueEmail(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[EnqueueEmail](p)
	if len(c.Emails) == 0 || !validOutgoing(c.Emails) {
		return invalid
	}
	return Result{Value: enqueueEmails(tx, index, 0, c.At, c.Emails)}
}

func applyEmailOutcome(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[EmailOutcome](p)
	for _, o := range c.Outcomes {
		var e Email
		if !validKey(o.ID) || !get(tx, bucketEmails, o.ID, &e) || e.State != EmailPending {
			continue // reaped, or already final (a new leader retried)
		}
		e.Attempts++
		e.LastError = truncateUTF8(o.Error, MaxEmailError)
		switch o.State {
		case EmailPending:
			e.NextAttemptAt = o.NextAttemptAt
		case EmailSent, EmailFailed:
			e.State, e.DoneAt, e.Body = o.State, o.At, nil
			del(tx, bucketEmailsPending, e.ID)
		default:
			continue
		}
		put(tx, bucketEmails, e.ID, e)
	}
	return Result{}
}

// truncateUTF8 is s cut to at most n bytes at a character boundary. A
// cut inside a character would store invalid UTF-8, which the record
// codec refuses to read back: the record, and every read and reap that
// meets it, would fail on every node.
func truncateUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// PendingEmails lists messages still to send, oldest first, at most max.
func (s *State) PendingEmails(max int) ([]Email, error) {
	var out []Email
	err := s.f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEmailsPending).Cursor()
		for k, _ := c.First(); k != nil && len(out) < max; k, _ = c.Next() {
			var e Email
			if get(tx, bucketEmails, string(k), &e) {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// Email returns one message of the outbox.
func (s *State) Email(id string) (Email, error) {
	var e Email
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketEmails, id, &e); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return e, err
}

// Emails lists the outbox (pending and final messages not yet reaped) in
// id order, which is the order they were committed.
func (s *State) Emails(p Page) ([]Email, int, error) { return listBucket[Email](s, bucketEmails, p) }

// EmailStats counts the outbox.
type EmailStats struct {
	Pending, Sent, Failed int
	// OldestPending is the CreatedAt of the oldest pending message (zero:
	// none).
	OldestPending time.Time
}

// EmailStats counts the outbox's messages by state. It reads every record
// still kept (sent and failed ones until the reap), so it is for the
// metrics' scrape, not for a request path.
func (s *State) EmailStats() (EmailStats, error) {
	var st EmailStats
	err := s.f.view(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketEmailsPending).Cursor().First(); k != nil {
			var e Email
			if get(tx, bucketEmails, string(k), &e) {
				st.OldestPending = e.CreatedAt
			}
		}
		return tx.Bucket(bucketEmails).ForEach(func(_, v []byte) error {
			var e Email
			if err := decodeRecord(v, &e); err != nil {
				return nil
			}
			switch e.State {
			case EmailPending:
				st.Pending++
			case EmailSent:
				st.Sent++
			case EmailFailed:
				st.Failed++
			}
			return nil
		})
	})
	return st, err
}
