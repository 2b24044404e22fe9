package fsm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout of the buckets below and the encoding of
// their records. A node refuses a state file of a later version rather
// than misreading it, and migrates one of an earlier version in place
// (migrations) when it opens or restores it.
//
//  1. JSON records.
//  2. CBOR records (codec.go).
const SchemaVersion = 2

var (
	bucketMeta          = []byte("meta")
	bucketOrgs          = []byte("orgs")
	bucketOrgSlugs      = []byte("org_slugs")
	bucketUsers         = []byte("users")
	bucketUserEmails    = []byte("user_emails")
	bucketUserPhones    = []byte("user_phones")
	bucketMembers       = []byte("memberships")
	bucketMemberByU     = []byte("memberships_by_user") // user_id/membership_id
	bucketMemberByO     = []byte("memberships_by_org")  // org_id/membership_id
	bucketMemberPair    = []byte("membership_pairs")    // user_id/org_id -> membership_id
	bucketClients       = []byte("clients")
	bucketKeys          = []byte("keys")
	bucketSSO           = []byte("sso_sessions")
	bucketSSOToken      = []byte("sso_by_token") // token hash -> sso id
	bucketApp           = []byte("app_sessions")
	bucketAppKey        = []byte("app_by_key")              // sso/client/org -> sid
	bucketAppBySSO      = []byte("app_by_sso")              // sso/sid
	bucketAppByUser     = []byte("app_by_user")             // user/sid
	bucketAppByOrg      = []byte("app_by_org")              // org/sid
	bucketSSOByUser     = []byte("sso_by_user")             // user/sso id
	bucketDeliveries    = []byte("deliveries")              // delivery id -> Delivery
	bucketPending       = []byte("deliveries_pending")      // delivery id -> pendingEntry{client, URI} (pending only)
	bucketCodes         = []byte("codes")                   // code hash -> Code
	bucketRevoked       = []byte("revoked")                 // jti -> expiry (RFC 3339)
	bucketConsents      = []byte("consents")                // user/client -> Consent
	bucketFactors       = []byte("factors")                 // user id -> Factors
	bucketPasskeyIDs    = []byte("passkey_ids")             // credential id (base64url) -> user id
	bucketChallenges    = []byte("challenges")              // challenge id -> Challenge
	bucketSMSCodes      = []byte("sms_codes")               // handle -> SMSCode
	bucketThrottle      = []byte("throttle")                // key -> Throttle
	bucketDirectories   = []byte("directories")             // directory id -> Directory
	bucketDirUsers      = []byte("directory_users")         // directory id/uid -> user id
	bucketGrants        = []byte("admin_grants")            // grant id -> AdminGrant
	bucketGrantByU      = []byte("admin_grants_by_user")    // user id/grant id
	bucketAPIKeys       = []byte("api_keys")                // key id -> APIKey
	bucketEmails        = []byte("emails")                  // email id -> Email
	bucketEmailsPending = []byte("emails_pending")          // email id -> "" (pending only)
	bucketLinks         = []byte("links")                   // token hash -> Link
	bucketLinkByU       = []byte("links_by_user")           // user id/purpose/hash -> ""
	bucketInvitations   = []byte("invitations")             // invitation id -> Invitation
	bucketIdPs          = []byte("identity_providers")      // provider id -> IdentityProvider
	bucketIdPSlugs      = []byte("identity_provider_slugs") // slug -> provider id
	bucketIdentities    = []byte("identities")              // identity id -> Identity
	bucketIdentBySubj   = []byte("identities_by_subject")   // provider id/b64(subject) -> identity id
	bucketIdentByUser   = []byte("identities_by_user")      // user id/identity id -> ""
	bucketSSOByIdent    = []byte("sso_by_identity")         // identity id/sso id -> ""
	bucketSSOByUpstream = []byte("sso_by_upstream_sid")     // provider id/b64(upstream sid)/sso id -> ""
	bucketUpstreamJTIs  = []byte("upstream_logout_jtis")    // provider id/b64(jti) -> expiry (RFC 3339)

	keySchema     = []byte("schema_version")
	keyApplied    = []byte("applied_index")
	keyAdminToken = []byte("admin_token_hash")
	keyKeysIndex  = []byte("keys_index")
)

// keyReapPrefix and a bucket's name: the key after which the next limited
// Reap goes on in that bucket (reapBucket).
const keyReapPrefix = "reap_position/"

var allBuckets = [][]byte{
	bucketMeta, bucketOrgs, bucketOrgSlugs, bucketUsers, bucketUserEmails,
	bucketUserPhones, bucketMembers, bucketMemberByU, bucketMemberByO,
	bucketMemberPair, bucketClients, bucketKeys, bucketSSO, bucketSSOToken,
	bucketApp, bucketAppKey, bucketAppBySSO, bucketAppByUser, bucketCodes,
	bucketRevoked, bucketConsents, bucketAppByOrg, bucketSSOByUser,
	bucketDeliveries, bucketPending, bucketFactors, bucketPasskeyIDs,
	bucketChallenges, bucketSMSCodes, bucketThrottle, bucketAudit, bucketAuditIdx,
	bucketDirectories, bucketDirUsers, bucketGrants, bucketGrantByU, bucketAPIKeys,
	bucketEmails, bucketEmailsPending, bucketLinks, bucketLinkByU, bucketInvitations,
	bucketIdPs, bucketIdPSlugs, bucketIdentities, bucketIdentBySubj, bucketIdentByUser,
	bucketSSOByIdent, bucketSSOByUpstream, bucketUpstreamJTIs,
}

func initSchema(tx *bolt.Tx) error {
	for _, b := range allBuckets {
		if string(b) == string(bucketAuditIdx) && trailLayout(tx) {
			continue // the trail indexes itself from format 3 on
		}
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if err := checkFormat(tx, "the state file"); err != nil {
		return err // before a migration changes anything
	}
	v := meta.Get(keySchema)
	if v == nil {
		return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
	}
	have, err := strconv.Atoi(string(v))
	if err != nil || have < 1 || have > SchemaVersion {
		return fmt.Errorf("%w: file has %s, this build reads 1 to %d", ErrSchema, v, SchemaVersion)
	}
	for ; have < SchemaVersion; have++ {
		if err := migration(have)(tx); err != nil {
			return fmt.Errorf("fsm: migrate schema %d to %d: %w", have, have+1, err)
		}
	}
	return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
}

// migration(v) rewrites a schema v file as schema v+1, inside the
// transaction that opens it.
func migration(v int) func(*bolt.Tx) error {
	switch v {
	case 1:
		return recordsJSONToCBOR
	}
	panic(fmt.Sprintf("fsm: no migration from schema %d", v))
}

// recordBuckets are the buckets whose values are records (every other
// bucket holds ids, index entries or raw values), with the type each
// holds.
type recordBucket struct {
	bucket []byte
	newRec func() any
}

func recordBuckets() []recordBucket {
	return []recordBucket{
		{bucketOrgs, func() any { return new(Org) }},
		{bucketUsers, func() any { return new(User) }},
		{bucketMembers, func() any { return new(Membership) }},
		{bucketClients, func() any { return new(Client) }},
		{bucketKeys, func() any { return new(Key) }},
		{bucketSSO, func() any { return new(SSOSession) }},
		{bucketApp, func() any { return new(AppSession) }},
		{bucketDeliveries, func() any { return new(Delivery) }},
		{bucketCodes, func() any { return new(Code) }},
		{bucketConsents, func() any { return new(Consent) }},
		{bucketFactors, func() any { return new(Factors) }},
		{bucketChallenges, func() any { return new(Challenge) }},
		{bucketSMSCodes, func() any { return new(SMSCode) }},
		{bucketThrottle, func() any { return new(Throttle) }},
		{bucketDirectories, func() any { return new(Directory) }},
		{bucketGrants, func() any { return new(AdminGrant) }},
		{bucketAPIKeys, func() any { return new(APIKey) }},
		{bucketEmails, func() any { return new(Email) }},
		{bucketLinks, func() any { return new(Link) }},
		{bucketInvitations, func() any { return new(Invitation) }},
		{bucketIdPs, func() any { return new(IdentityProvider) }},
		{bucketIdentities, func() any { return new(Identity) }},
	}
}

// recordsJSONToCBOR is the migration from schema 1: every record is read
// with encoding/json into its type and written again with the record
// codec.
func recordsJSONToCBOR(tx *bolt.Tx) error {
	for _, rb := range recordBuckets() {
		b := tx.Bucket(rb.bucket)
		type kv struct{ k, v []byte }
		var out []kv
		err := b.ForEach(func(k, v []byte) error {
			rec := rb.newRec()
			if err := json.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("%s/%s: %w", rb.bucket, k, err)
			}
			enc, err := encodeRecord(rec)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", rb.bucket, k, err)
			}
			out = append(out, kv{append([]byte(nil), k...), enc})
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range out {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// decode reads a command's payload (JSON, as the raft log holds it).
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
