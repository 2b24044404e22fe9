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

func init() { register(TypeDeliveryOutcome, applyDeliveryOutcome) }

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
		putIndex(tx, bucketPending, d.ID, "")
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
