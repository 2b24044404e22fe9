package fsm

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliverySent      = "sent"
	DeliveryAbandoned = "abandoned"
)

// Delivery is one back-channel logout token owed to a client. It is
// recorded by the same apply that ends the app session, so an acknowledged
// logout always has its deliveries on record; the leader sends them and
// records each outcome with DeliveryOutcome.
type Delivery struct {
	// ID is "<raft index>-<seq>": deterministic, unique, and ordered by
	// creation. Senders use it as the logout token's jti, so a retried
	// delivery carries the same jti and receivers can drop duplicates.
	ID          string `json:"id" cbor:"1,keyasint"`
	LogoutIndex uint64 `json:"logout_index" cbor:"2,keyasint"` // raft index of the command that caused it
	ClientID    string `json:"client_id" cbor:"3,keyasint"`
	URI         string `json:"uri" cbor:"4,keyasint"`
	Sub         string `json:"sub" cbor:"5,keyasint"`
	OrgID       string `json:"organization_id" cbor:"6,keyasint"`
	SID         string `json:"sid,omitempty" cbor:"7,keyasint,omitempty"` // empty: the sub-only shape
	Cause       string `json:"cause" cbor:"8,keyasint"`

	CreatedAt     time.Time `json:"created_at" cbor:"9,keyasint"`
	State         string    `json:"state" cbor:"10,keyasint"`
	Attempts      int       `json:"attempts" cbor:"11,keyasint"`
	NextAttemptAt time.Time `json:"next_attempt_at" cbor:"12,keyasint"`
	LastError     string    `json:"last_error,omitempty" cbor:"13,keyasint,omitempty"`
	DoneAt        time.Time `json:"done_at,omitzero" cbor:"14,keyasint,omitzero"`
}

// DeliveryOutcome records the result of delivery attempts (the leader
// batches several). State pending with a NextAttemptAt schedules a retry.
type DeliveryOutcome struct {
	Outcomes []Outcome `json:"outcomes"`
}

// Outcome is one delivery's attempt result.
type Outcome struct {
	ID            string    `json:"id"`
	State         string    `json:"state"`
	At            time.Time `json:"at"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	Error         string    `json:"error,omitempty"`
}

func init() {
	register(TypeDeliveryOutcome, applyDeliveryOutcome)
	// A delivery is reaped once sent or abandoned; a pending one stays
	// until it is.
	reaps(expiring(bucketDeliveries, func(st *ReapStats) *int { return &st.Deliveries }, func(d *Delivery, before time.Time) bool {
		return d.State != DeliveryPending && !d.DoneAt.After(before)
	}))
}

func applyDeliveryOutcome(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeliveryOutcome](p)
	for _, o := range c.Outcomes {
		var d Delivery
		if !get(tx, bucketDeliveries, o.ID, &d) || d.State != DeliveryPending {
			continue // reaped, or already final (a new leader retried)
		}
		d.Attempts++
		d.State, d.LastError = o.State, o.Error
		if o.State == DeliveryPending {
			d.NextAttemptAt = o.NextAttemptAt
		} else {
			d.DoneAt = o.At
			del(tx, bucketPending, d.ID)
		}
		put(tx, bucketDeliveries, d.ID, d)
	}
	return Result{}
}

// logoutTarget is one token to owe: to client for app session a, with or
// without the sid.
type logoutTarget struct {
	app     AppSession
	subOnly bool
}

// enqueueLogouts records a delivery per target whose client has a
// back-channel URI. Sub-only tokens are sent once per (client, person,
// organization), however many app sessions they ended.
func enqueueLogouts(tx *bolt.Tx, index uint64, at time.Time, cause string, targets []logoutTarget) []Delivery {
	var out []Delivery
	seen := map[string]bool{}
	for _, t := range targets {
		var cl Client
		if !get(tx, bucketClients, t.app.ClientID, &cl) || cl.BackchannelLogoutURI == "" {
			continue
		}
		sid := t.app.ID
		if t.subOnly {
			k := cl.ID + "/" + t.app.UserID + "/" + t.app.OrgID
			if seen[k] {
				continue
			}
			seen[k], sid = true, ""
		}
		d := Delivery{
			ID: fmt.Sprintf("%020d-%04d", index, len(out)), LogoutIndex: index,
			ClientID: cl.ID, URI: cl.BackchannelLogoutURI, Sub: t.app.UserID, OrgID: t.app.OrgID, SID: sid, Cause: cause,
			CreatedAt: at, State: DeliveryPending, NextAttemptAt: at,
		}
		put(tx, bucketDeliveries, d.ID, d)
		put(tx, bucketPending, d.ID, pendingEntry{ClientID: d.ClientID, URI: d.URI})
		out = append(out, d)
	}
	return out
}

func withSID(apps []AppSession) []logoutTarget {
	out := make([]logoutTarget, len(apps))
	for i, a := range apps {
		out[i] = logoutTarget{app: a}
	}
	return out
}

func subOnly(apps []AppSession) []logoutTarget {
	out := make([]logoutTarget, len(apps))
	for i, a := range apps {
		out[i] = logoutTarget{app: a, subOnly: true}
	}
	return out
}

// PendingDeliveries lists deliveries still owed, oldest first, at most max.
func (s *State) PendingDeliveries(max int) ([]Delivery, error) {
	var out []Delivery
	err := s.f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		for k, _ := c.First(); k != nil && len(out) < max; k, _ = c.Next() {
			var d Delivery
			if get(tx, bucketDeliveries, string(k), &d) {
				out = append(out, d)
			}
		}
		return nil
	})
	return out, err
}

// pendingEntry is the value of a delivery's entry in the pending index:
// whom it is owed to, so that a scan can pass over the deliveries of a
// busy receiver without reading them. Entries written before it existed
// hold nothing (ScanPending then reads the delivery).
type pendingEntry struct {
	ClientID string `cbor:"1,keyasint"`
	URI      string `cbor:"2,keyasint"`
}

// PendingRef is a pending delivery as the pending index names it: its
// id, and the client and back-channel URI it is owed to.
type PendingRef struct {
	ID       string
	ClientID string
	URI      string
}

// ScanPending walks the pending deliveries oldest first, in one read
// transaction, from the first whose id sorts after after ("" from the
// oldest), and examines at most limit of them (at least one). For each
// it calls visit with the entry's reference and a function that reads
// the delivery (false: the record is gone; valid only during that call),
// so a visitor with no use for a delivery passes over it without reading
// it. The walk stops early when visit returns false. ScanPending returns
// the id of the last delivery examined, or "" when the walk reached the
// end of the pending deliveries.
//
// visit runs inside the read transaction: it must be quick and must not
// call back into State.
func (s *State) ScanPending(after string, limit int, visit func(ref PendingRef, read func() (Delivery, bool)) bool) (last string, err error) {
	limit = max(limit, 1)
	err = s.f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		k, v := c.First()
		if after != "" {
			k, v = c.Seek([]byte(after))
			if k != nil && string(k) == after {
				k, v = c.Next()
			}
		}
		var id string
		read := func() (Delivery, bool) {
			var d Delivery
			ok := get(tx, bucketDeliveries, id, &d)
			return d, ok
		}
		var prev []byte // the value behind e: a run of one client's entries is decoded once
		var e pendingEntry
		for n := 0; k != nil && n < limit; k, v = c.Next() {
			n++
			id = string(k)
			ref := PendingRef{ID: id}
			switch {
			case len(v) == 0:
				if d, ok := read(); ok {
					ref.ClientID, ref.URI = d.ClientID, d.URI
				}
			case bytes.Equal(v, prev):
				ref.ClientID, ref.URI = e.ClientID, e.URI
			default:
				e = pendingEntry{}
				mustUnmarshal(v, &e)
				prev = v // valid while the transaction lives
				ref.ClientID, ref.URI = e.ClientID, e.URI
			}
			last = id
			if !visit(ref, read) {
				return nil
			}
		}
		if k == nil {
			last = ""
		}
		return nil
	})
	return last, err
}

// DeliveriesOf lists the deliveries caused by one command, by the raft
// index that EndedApps.Index reports.
func (s *State) DeliveriesOf(index uint64) ([]Delivery, error) {
	var out []Delivery
	err := s.f.view(func(tx *bolt.Tx) error {
		prefix := []byte(fmt.Sprintf("%020d-", index))
		c := tx.Bucket(bucketDeliveries).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var d Delivery
			mustUnmarshal(v, &d)
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// Delivery returns one delivery.
func (s *State) Delivery(id string) (Delivery, error) {
	var d Delivery
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketDeliveries, id, &d); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return d, err
}
