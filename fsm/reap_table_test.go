package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// reapSeed writes, straight into the buckets, one record that a Reap at
// t0+1h finds dead and one it keeps in every bucket the reap sweeps, with
// the index entries of the sessions.
func reapSeed(t *testing.T, f *FSM) {
	t.Helper()
	dead, live := t0.Add(30*time.Minute), t0.Add(2*time.Hour)
	err := f.db.Update(func(tx *bolt.Tx) error {
		raw := func(bucket []byte, k, v string) {
			if err := tx.Bucket(bucket).Put([]byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		put(tx, bucketCodes, "code-dead", Code{Hash: "code-dead", ExpiresAt: dead})
		put(tx, bucketCodes, "code-access-live", Code{Hash: "code-access-live", ExpiresAt: dead, AccessExpires: live})
		put(tx, bucketCodes, "code-live", Code{Hash: "code-live", ExpiresAt: live})
		raw(bucketRevoked, "jti-dead", dead.Format(time.RFC3339))
		raw(bucketRevoked, "jti-live", live.Format(time.RFC3339))
		raw(bucketRevoked, "jti-garbled", "not a time")
		for i, s := range []SSOSession{
			{ID: "sso-idle", UserID: "u1", IdleExpiresAt: dead, ExpiresAt: live},
			{ID: "sso-ended", UserID: "u1", IdleExpiresAt: live, ExpiresAt: live, EndedAt: dead},
			{ID: "sso-ended-later", UserID: "u2", IdleExpiresAt: live, ExpiresAt: live, EndedAt: live},
			{ID: "sso-live", UserID: "u2", IdleExpiresAt: live, ExpiresAt: live},
		} {
			put(tx, bucketSSO, s.ID, s)
			raw(bucketSSOByUser, s.UserID+"/"+s.ID, "")
			raw(bucketSSOToken, fmt.Sprintf("token-%d", i), s.ID)
			for _, c := range []string{"c1", "c2"} {
				a := AppSession{ID: s.ID + "-" + c, SSOSessionID: s.ID, ClientID: c, OrgID: "o1", UserID: s.UserID}
				put(tx, bucketApp, a.ID, a)
				raw(bucketAppKey, appKey(a.SSOSessionID, a.ClientID, a.OrgID), a.ID)
				raw(bucketAppBySSO, s.ID+"/"+a.ID, "")
				raw(bucketAppByUser, a.UserID+"/"+a.ID, "")
				raw(bucketAppByOrg, a.OrgID+"/"+a.ID, "")
			}
		}
		raw(bucketSSOToken, "token-orphan", "sso-gone")
		put(tx, bucketDeliveries, "d-sent", Delivery{ID: "d-sent", State: DeliverySent, DoneAt: dead})
		put(tx, bucketDeliveries, "d-abandoned-later", Delivery{ID: "d-abandoned-later", State: DeliveryAbandoned, DoneAt: live})
		put(tx, bucketDeliveries, "d-pending", Delivery{ID: "d-pending", State: DeliveryPending})
		put(tx, bucketChallenges, "ch-dead", Challenge{ID: "ch-dead", ExpiresAt: dead})
		put(tx, bucketChallenges, "ch-live", Challenge{ID: "ch-live", ExpiresAt: live})
		put(tx, bucketSMSCodes, "sms-dead", SMSCode{ID: "sms-dead", ExpiresAt: dead})
		put(tx, bucketSMSCodes, "sms-live", SMSCode{ID: "sms-live", ExpiresAt: live})
		put(tx, bucketThrottle, "th-dead", Throttle{Key: "th-dead", ExpiresAt: dead})
		put(tx, bucketThrottle, "th-live", Throttle{Key: "th-live", ExpiresAt: live})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stateDigest is a hash of every key and value of every bucket but
// meta's applied index, and the list of the keys left in the swept
// buckets (for the message). Buckets named in skipValues count by their
// keys only.
func stateDigest(t *testing.T, f *FSM, skipValues ...string) (string, string) {
	t.Helper()
	h := sha256.New()
	var left []string
	err := f.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				if string(name) == string(bucketMeta) && string(k) == string(keyApplied) {
					return nil
				}
				if slices.Contains(skipValues, string(name)) {
					v = nil
				}
				fmt.Fprintf(h, "%q/%q=%x\n", name, k, v)
				if string(name) != string(bucketMeta) {
					left = append(left, string(name)+"/"+string(k))
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(left)
	return hex.EncodeToString(h.Sum(nil)), strings.Join(left, " ")
}

// TestReapDeletesWhatItDid pins what a Reap deletes and counts in every
// bucket it sweeps, in one full reap and in limited ones (one record a
// bucket at a time, to the end of the sweep): the digests were taken with
// the hand-written bucket list the reap table replaced, so the table
// deletes exactly what the list did.
func TestReapDeletesWhatItDid(t *testing.T) {
	// Left after a full reap; a limited sweep also leaves token-0, the
	// token of sso-idle, which its pass over sso_by_token read before the
	// pass over sso_sessions reached sso-idle (the next sweep takes it).
	const wantLeft = "app_by_key/sso-live/c1/o1 app_by_key/sso-live/c2/o1 app_by_org/o1/sso-live-c1 app_by_org/o1/sso-live-c2 " +
		"app_by_sso/sso-live/sso-live-c1 app_by_sso/sso-live/sso-live-c2 app_by_user/u2/sso-live-c1 app_by_user/u2/sso-live-c2 " +
		"app_sessions/sso-live-c1 app_sessions/sso-live-c2 challenges/ch-live codes/code-access-live codes/code-live " +
		"deliveries/d-abandoned-later deliveries/d-pending revoked/jti-garbled revoked/jti-live sms_codes/sms-live " +
		"%ssso_by_token/token-3 sso_by_user/u2/sso-live sso_sessions/sso-live throttle/th-live"
	want := ReapStats{Codes: 1, Revocations: 1, SSOSessions: 3, AppSessions: 6, Deliveries: 1, Challenges: 1, SMSCodes: 1, Throttles: 1}
	wantDigest := map[int]string{
		0: "a40793d42d8edc9456f0ce1f82e80b4257dde6a7a36ff464c89b88f4be0a26fe",
		1: "a218335f98453c8495c95cd08f597e230f8c6f980ce6a5f786cd37d19405c785",
	}
	for _, limit := range []int{0, 1} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			f, err := Open(filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			reapSeed(t, f)
			var got ReapStats
			for index := uint64(1); ; index++ {
				if index > 20 {
					t.Fatal("the sweep does not end")
				}
				r := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(TypeReap, Reap{Before: t0.Add(time.Hour), Limit: limit}).Encode()}).(Result)
				st := r.Value.(ReapStats)
				got.Codes += st.Codes
				got.Revocations += st.Revocations
				got.SSOSessions += st.SSOSessions
				got.AppSessions += st.AppSessions
				got.Deliveries += st.Deliveries
				got.Challenges += st.Challenges
				got.SMSCodes += st.SMSCodes
				got.Throttles += st.Throttles
				if !st.More {
					break
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("reaped %+v, want %+v", got, want)
			}
			digest, left := stateDigest(t, f)
			wl := fmt.Sprintf(wantLeft, "")
			if limit > 0 {
				wl = fmt.Sprintf(wantLeft, "sso_by_token/token-0 ")
			}
			if left != wl {
				t.Errorf("left:\n%s\nwant:\n%s", left, wl)
			}
			if digest != wantDigest[limit] {
				t.Errorf("state digest %s, want %s", digest, wantDigest[limit])
			}
		})
	}
}

// TestEveryExpiringBucketIsReaped: a record type with an expiry or an end
// (a time field named *Expires*, EndedAt or DoneAt) lives in a bucket the
// reap table sweeps, or in one whose records go with another's (listed
// here with why). Every swept bucket exists in the schema.
func TestEveryExpiringBucketIsReaped(t *testing.T) {
	goesWith := map[string]string{
		string(bucketApp): "an app session is deleted with its SSO session (reapSSOSessions)",
	}
	swept := map[string]bool{}
	for _, e := range reapTable {
		swept[string(e.bucket)] = true
		known := false
		for _, b := range allBuckets {
			known = known || string(b) == string(e.bucket)
		}
		if !known {
			t.Errorf("the reap table sweeps %q, which is not in allBuckets", e.bucket)
		}
	}
	timeType := reflect.TypeFor[time.Time]()
	for _, rb := range recordBuckets() {
		typ := reflect.TypeOf(rb.newRec()).Elem()
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Type != timeType || !(strings.Contains(f.Name, "Expires") || f.Name == "EndedAt" || f.Name == "DoneAt") {
				continue
			}
			if !swept[string(rb.bucket)] && goesWith[string(rb.bucket)] == "" {
				t.Errorf("%s records (%s) have %s but no reap sweeps their bucket: register it with reaps in %s's file",
					rb.bucket, typ.Name(), f.Name, typ.Name())
			}
			break
		}
	}
	if !swept[string(bucketRevoked)] {
		t.Error("revocations (jti -> expiry) are not reaped")
	}
}
