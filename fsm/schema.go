package fsm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout of the buckets below. A node refuses a state
// file of another version rather than misreading it.
const SchemaVersion = 1

var (
	bucketMeta       = []byte("meta")
	bucketOrgs       = []byte("orgs")
	bucketOrgSlugs   = []byte("org_slugs")
	bucketUsers      = []byte("users")
	bucketUserEmails = []byte("user_emails")
	bucketUserPhones = []byte("user_phones")
	bucketMembers    = []byte("memberships")
	bucketMemberByU  = []byte("memberships_by_user") // user_id/membership_id
	bucketMemberByO  = []byte("memberships_by_org")  // org_id/membership_id
	bucketMemberPair = []byte("membership_pairs")    // user_id/org_id -> membership_id
	bucketClients    = []byte("clients")
	bucketKeys       = []byte("keys")
	bucketSSO        = []byte("sso_sessions")
	bucketSSOToken   = []byte("sso_by_token") // token hash -> sso id
	bucketApp        = []byte("app_sessions")
	bucketAppKey     = []byte("app_by_key")         // sso/client/org -> sid
	bucketAppBySSO   = []byte("app_by_sso")         // sso/sid
	bucketAppByUser  = []byte("app_by_user")        // user/sid
	bucketAppByOrg   = []byte("app_by_org")         // org/sid
	bucketSSOByUser  = []byte("sso_by_user")        // user/sso id
	bucketDeliveries = []byte("deliveries")         // delivery id -> Delivery
	bucketPending    = []byte("deliveries_pending") // delivery id (pending only)
	bucketCodes      = []byte("codes")              // code hash -> Code
	bucketRevoked    = []byte("revoked")            // jti -> expiry (RFC 3339)
	bucketConsents   = []byte("consents")           // user/client -> Consent
	bucketFactors    = []byte("factors")            // user id -> Factors
	bucketPasskeyIDs = []byte("passkey_ids")        // credential id (base64url) -> user id
	bucketChallenges = []byte("challenges")         // challenge id -> Challenge
	bucketSMSCodes   = []byte("sms_codes")          // handle -> SMSCode
	bucketThrottle   = []byte("throttle")           // key -> Throttle

	keySchema     = []byte("schema_version")
	keyApplied    = []byte("applied_index")
	keyAdminToken = []byte("admin_token_hash")
	keyKeysIndex  = []byte("keys_index")
)

var allBuckets = [][]byte{
	bucketMeta, bucketOrgs, bucketOrgSlugs, bucketUsers, bucketUserEmails,
	bucketUserPhones, bucketMembers, bucketMemberByU, bucketMemberByO,
	bucketMemberPair, bucketClients, bucketKeys, bucketSSO, bucketSSOToken,
	bucketApp, bucketAppKey, bucketAppBySSO, bucketAppByUser, bucketCodes,
	bucketRevoked, bucketConsents, bucketAppByOrg, bucketSSOByUser,
	bucketDeliveries, bucketPending, bucketFactors, bucketPasskeyIDs,
	bucketChallenges, bucketSMSCodes, bucketThrottle,
}

func initSchema(tx *bolt.Tx) error {
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	v := meta.Get(keySchema)
	if v == nil {
		return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
	}
	if string(v) != strconv.Itoa(SchemaVersion) {
		return fmt.Errorf("%w: file has %s, this build reads %d", ErrSchema, v, SchemaVersion)
	}
	return nil
}

// put stores v as JSON under key. Records are small; JSON keeps the file
// inspectable with bbolt's own tools.
func put(tx *bolt.Tx, bucket []byte, key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode record: %v", err))
	}
	if err := tx.Bucket(bucket).Put([]byte(key), b); err != nil {
		panic(fmt.Sprintf("fsm: put: %v", err))
	}
}

// get decodes the record under key into v; false when absent.
func get(tx *bolt.Tx, bucket []byte, key string, v any) bool {
	b := tx.Bucket(bucket).Get([]byte(key))
	if b == nil {
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		panic(fmt.Sprintf("fsm: decode record %s/%s: %v", bucket, key, err))
	}
	return true
}

func del(tx *bolt.Tx, bucket []byte, key string) {
	if err := tx.Bucket(bucket).Delete([]byte(key)); err != nil {
		panic(fmt.Sprintf("fsm: delete: %v", err))
	}
}

func exists(tx *bolt.Tx, bucket []byte, key string) bool {
	return tx.Bucket(bucket).Get([]byte(key)) != nil
}

func mustUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(fmt.Sprintf("fsm: decode record: %v", err))
	}
}

func decode[T any](payload []byte) T {
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		panic(fmt.Sprintf("fsm: decode payload: %v", err))
	}
	return v
}

// validID reports whether s can be a record id: 1 to 256 bytes without
// '/', which separates the parts of composite index keys.
func validID(s ...string) bool {
	for _, v := range s {
		if v == "" || len(v) > 256 || strings.ContainsRune(v, '/') {
			return false
		}
	}
	return true
}

// validKey reports whether s can be a bbolt key of ours: 1 to 1024 bytes.
func validKey(s ...string) bool {
	for _, v := range s {
		if v == "" || len(v) > 1024 {
			return false
		}
	}
	return true
}

var invalid = Result{Err: ErrInvalid}
