package fsm

import (
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Client types.
const (
	ClientConfidential = "confidential"
	ClientPublic       = "public"
)

// Client is a relying-party registration.
type Client struct {
	ID                   string    `json:"client_id" cbor:"1,keyasint"`
	Name                 string    `json:"name" cbor:"2,keyasint"`
	Type                 string    `json:"type" cbor:"3,keyasint"`
	SecretHash           string    `json:"secret_hash,omitempty" cbor:"4,keyasint,omitempty"` // argon2id PHC string; confidential only
	RedirectURIs         []string  `json:"redirect_uris" cbor:"5,keyasint"`
	Scopes               []string  `json:"scopes" cbor:"6,keyasint"`
	OrganizationID       string    `json:"organization_id" cbor:"7,keyasint"`
	MultiOrganization    bool      `json:"multi_organization" cbor:"8,keyasint"`
	Organizations        []string  `json:"organizations" cbor:"9,keyasint"`
	AccessTokenTTL       int64     `json:"access_token_ttl" cbor:"10,keyasint"` // seconds
	BackchannelLogoutURI string    `json:"backchannel_logout_uri,omitempty" cbor:"11,keyasint,omitempty"`
	SkipConsent          bool      `json:"skip_consent" cbor:"12,keyasint"`
	Suspended            bool      `json:"suspended" cbor:"13,keyasint"`
	CreatedAt            time.Time `json:"created_at" cbor:"14,keyasint"`
	UpdatedAt            time.Time `json:"updated_at" cbor:"15,keyasint"`
	// RateLimit is the client's own limit on the token, introspection and
	// revocation endpoints per client address, "N/duration" (the
	// registration's rate_limit); empty, as in every record written before
	// it existed: the node's --rate-limit.
	RateLimit string `json:"rate_limit,omitempty" cbor:"16,keyasint,omitempty"`
	// ApplicationType is "native" for a desktop or mobile app (RFC 8252:
	// private-use scheme and any-port loopback redirects, never a
	// secret); empty, as in every record written before it existed, is a
	// web application ("web" is not stored).
	ApplicationType string `json:"application_type,omitempty" cbor:"17,keyasint,omitempty"`
	// WebOrigins are the browser origins that may call the token
	// endpoint, userinfo and memberships from script (CORS), when
	// WebOriginsSet; otherwise the registration named none and the
	// client has its default (internal/redirect.DefaultOrigins), which
	// follows its redirect URIs. WebOriginsSet with no origins allows
	// none.
	WebOrigins    []string `json:"web_origins,omitempty" cbor:"18,keyasint,omitempty"`
	WebOriginsSet bool     `json:"web_origins_set,omitempty" cbor:"19,keyasint,omitempty"`
}

// ApplicationNative is Client.ApplicationType of a native app.
const ApplicationNative = "native"

// validRateLimit reports whether s can be a Client's RateLimit: empty, or
// "N/duration" with N a whole number of at least 1 and a positive
// duration as time.ParseDuration reads it. It checks the form only (what
// every version of apply must agree on); the admin API sets the bounds.
func validRateLimit(s string) bool {
	if s == "" {
		return true
	}
	n, d, ok := strings.Cut(s, "/")
	limit, err := strconv.Atoi(n)
	if !ok || err != nil || limit < 1 || n[0] == '+' {
		return false
	}
	per, err := time.ParseDuration(d)
	return err == nil && per > 0
}

// PutClient creates (Create) or replaces a client registration. The
// proposer merges a patch into the record it read; ExpectUpdatedAt guards
// against a concurrent update slipping in between (optimistic concurrency).
type PutClient struct {
	Client          Client    `json:"client"`
	Create          bool      `json:"create"`
	ExpectUpdatedAt time.Time `json:"expect_updated_at,omitzero"`
}

// DeleteClient removes a registration.
type DeleteClient struct {
	ID string `json:"id"`
}

func init() {
	register(TypeCreateClient, applyPutClient)
	register(TypeUpdateClient, applyPutClient)
	register(TypeDeleteClient, applyDeleteClient)
}

func applyPutClient(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[PutClient](p)
	if !validID(c.Client.ID, c.Client.OrganizationID) || !validRateLimit(c.Client.RateLimit) ||
		(c.Client.ApplicationType != "" && c.Client.ApplicationType != ApplicationNative) {
		return invalid
	}
	var cur Client
	found := get(tx, bucketClients, c.Client.ID, &cur)
	switch {
	case c.Create && found:
		return Result{Err: &ConflictError{Field: "client_id"}}
	case !c.Create && !found:
		return Result{Err: ErrNotFound}
	case !c.Create && !c.ExpectUpdatedAt.IsZero() && !cur.UpdatedAt.Equal(c.ExpectUpdatedAt):
		return Result{Err: &ConflictError{Field: "updated_at"}}
	}
	var o Org
	if !get(tx, bucketOrgs, c.Client.OrganizationID, &o) || o.Status == OrgDeleted {
		return Result{Err: &NotFoundError{Field: "organization_id"}}
	}
	for _, id := range c.Client.Organizations {
		if !exists(tx, bucketOrgs, id) {
			return Result{Err: &NotFoundError{Field: "organizations"}}
		}
	}
	put(tx, bucketClients, c.Client.ID, c.Client)
	return Result{Value: c.Client}
}

func applyDeleteClient(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeleteClient](p)
	if !validID(c.ID) {
		return invalid
	}
	if !exists(tx, bucketClients, c.ID) {
		return Result{Err: ErrNotFound}
	}
	del(tx, bucketClients, c.ID)
	return Result{}
}

// Client returns one registration.
func (s *State) Client(id string) (Client, error) {
	var c Client
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketClients, id, &c); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return c, err
}

// clientLimitView is ClientAuthAndLimit's view of a Client's RateLimit.
type clientLimitView struct {
	RateLimit string `json:"rate_limit" cbor:"16,keyasint"`
}

// ClientAuth returns the fields of a registration that client
// authentication reads: ID, Type, SecretHash, OrganizationID and
// Suspended; every other field is zero. It decodes only those (the
// record views of CheckAccess), so the back-channel endpoints
// (introspection, revocation) do not pay for redirect URIs, scopes and
// organization lists on every call. ErrNotFound when there is none.
func (s *State) ClientAuth(id string) (Client, error) { return s.clientAuth(id, false) }

// ClientAuthAndLimit is ClientAuth with RateLimit as well, which the rate
// limit of the back-channel endpoints reads before authentication. It
// costs one more read of the record than ClientAuth (RateLimit is not in
// the cached view), so a node whose rate limit is off uses ClientAuth.
func (s *State) ClientAuthAndLimit(id string) (Client, error) { return s.clientAuth(id, true) }

func (s *State) clientAuth(id string, withLimit bool) (Client, error) {
	var v clientAuthView
	var l clientLimitView
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error {
		if v, ok = s.f.accessGenFor(tx).clientAuth(tx, id); ok && withLimit {
			get(tx, bucketClients, id, &l) // one field decoded, the others skipped
		}
		return nil
	})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return Client{ID: v.ID, Type: v.Type, SecretHash: v.SecretHash, OrganizationID: v.OrganizationID, Suspended: v.Suspended,
		RateLimit: l.RateLimit}, err
}

// Clients lists registrations in client_id order.
func (s *State) Clients(p Page) ([]Client, int, error) {
	return listBucket[Client](s, bucketClients, p)
}
