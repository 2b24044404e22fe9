package fsm

import (
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// People brought from another provider (docs/operators/import.md): a batch
// of them in one write, and the sign-in that replaces an imported
// password hash with the node's own.

// MaxImportBatch bounds the people of one ImportUsers command (and of one
// POST /admin/v1/users/import), so one raft entry stays well under a
// megabyte.
const MaxImportBatch = 1000

// Outcomes of one imported person (ImportOutcome.Status).
const (
	ImportCreated = "created"
	ImportExists  = "exists"
	ImportFailed  = "error"
)

// ImportUsers creates people in one write. The proposer gives each a fresh
// id and one fresh membership id per organization, and has checked the
// password hash (internal/password.Hasher.Check). Idempotent by address:
// a person whose address is already here (in any case, or earlier in the
// same batch) is left as they are and reported ImportExists, so a batch
// sent twice changes nothing the second time.
type ImportUsers struct {
	Users []ImportedUser `json:"users"`
	At    time.Time      `json:"at"`
}

// ImportedUser is one person of an ImportUsers command: active member of
// each of OrgIDs, with the membership ids MembershipIDs (same length).
type ImportedUser struct {
	User          User     `json:"user"`
	OrgIDs        []string `json:"org_ids,omitempty"`
	MembershipIDs []string `json:"membership_ids,omitempty"`
}

// ImportOutcome is what became of one ImportedUser, in the command's
// order: the person's id (the new one, or the one already holding the
// address), or the field and code of the problem.
type ImportOutcome struct {
	Status string `json:"status"`
	ID     string `json:"id,omitempty"`
	Field  string `json:"field,omitempty"`
	Code   string `json:"code,omitempty"`
}

// Limits of what an ImportedUser may carry.
const (
	maxImportedHash = 512
	maxImportedOrgs = 100
)

// RehashPassword replaces a person's password hash with New if it is
// still Old: after a sign-in with an imported (bcrypt, PBKDF2) or weaker
// hash, the node stores its own argon2id hash of the same password. If the
// password changed in between, ErrConflict and nothing changes. It is not
// a credential change: no session ends.
type RehashPassword struct {
	UserID string    `json:"user_id"`
	Old    string    `json:"old"`
	New    string    `json:"new"`
	At     time.Time `json:"at"`
}

func init() {
	register(TypeImportUsers, applyImportUsers)
	register(TypeRehashPassword, applyRehashPassword)
	auditDerive[TypeImportUsers] = deriveImportUsers
}

func applyImportUsers(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[ImportUsers](p)
	if len(c.Users) == 0 || len(c.Users) > MaxImportBatch {
		return invalid
	}
	out := make([]ImportOutcome, len(c.Users))
	for i, iu := range c.Users {
		out[i] = importOne(tx, iu, c.At)
	}
	return Result{Value: out}
}

func importOne(tx *bolt.Tx, iu ImportedUser, at time.Time) ImportOutcome {
	u := iu.User
	failed := func(field, code string) ImportOutcome {
		return ImportOutcome{Status: ImportFailed, Field: field, Code: code}
	}
	switch {
	case !validID(u.ID) || !validKey(u.Email):
		return failed("email", "invalid")
	case len(u.Phone) > 64:
		return failed("phone", "invalid")
	case len(u.PasswordHash) > maxImportedHash:
		return failed("password_hash", "too_long")
	case len(iu.OrgIDs) > maxImportedOrgs || len(iu.OrgIDs) != len(iu.MembershipIDs) || !validID(iu.OrgIDs...) || !validID(iu.MembershipIDs...):
		return failed("organizations", "invalid")
	}
	if id, ok := getIndex(tx, bucketUserEmails, emailKey(u.Email)); ok {
		return ImportOutcome{Status: ImportExists, ID: id}
	}
	if exists(tx, bucketUsers, u.ID) {
		return failed("id", "conflict")
	}
	if u.Phone != "" && exists(tx, bucketUserPhones, u.Phone) {
		return failed("phone", "conflict")
	}
	seen := map[string]bool{}
	for _, orgID := range iu.OrgIDs {
		var o Org
		if !get(tx, bucketOrgs, orgID, &o) || o.Status == OrgDeleted {
			return failed("organizations", "not_found")
		}
		if seen[orgID] {
			return failed("organizations", "duplicate")
		}
		seen[orgID] = true
	}
	for _, mid := range iu.MembershipIDs {
		if exists(tx, bucketMembers, mid) {
			return failed("id", "conflict")
		}
	}
	u.CreatedAt, u.UpdatedAt = at, at
	put(tx, bucketUsers, u.ID, u)
	putIndex(tx, bucketUserEmails, emailKey(u.Email), u.ID)
	if u.Phone != "" {
		putIndex(tx, bucketUserPhones, u.Phone, u.ID)
	}
	for i, orgID := range iu.OrgIDs {
		putMembership(tx, Membership{ID: iu.MembershipIDs[i], UserID: u.ID, OrgID: orgID, Status: MembershipActive, CreatedAt: at, UpdatedAt: at})
	}
	return ImportOutcome{Status: ImportCreated, ID: u.ID}
}

// getIndex reads the id an index key points at.
func getIndex(tx *bolt.Tx, bucket []byte, key string) (string, bool) {
	v := tx.Bucket(bucket).Get([]byte(key))
	if v == nil {
		return "", false
	}
	return string(v), true
}

func applyRehashPassword(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[RehashPassword](p)
	if !validID(c.UserID) || c.Old == "" || c.New == "" || len(c.New) > maxImportedHash {
		return invalid
	}
	var u User
	if !get(tx, bucketUsers, c.UserID, &u) {
		return Result{Err: ErrNotFound}
	}
	if u.PasswordHash != c.Old {
		return Result{Err: ErrConflict}
	}
	u.PasswordHash, u.UpdatedAt = c.New, c.At
	put(tx, bucketUsers, u.ID, u)
	return Result{}
}

// deriveImportUsers completes the batch's admin event with its counts; the
// people created are in the store, the event says how many.
func deriveImportUsers(_ *bolt.Tx, _ []byte, res Result, _ *Audit, se *Event) []Event {
	if se == nil {
		return nil
	}
	if out, ok := res.Value.([]ImportOutcome); ok {
		n := map[string]int{}
		for _, o := range out {
			n[o.Status]++
		}
		if se.Detail == nil {
			se.Detail = map[string]string{}
		}
		for _, s := range []string{ImportCreated, ImportExists, ImportFailed} {
			se.Detail[s] = strconv.Itoa(n[s])
		}
	}
	return []Event{*se}
}
