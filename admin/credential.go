package admin

import (
	"context"
	"time"
)

// Who is asking. Three kinds of credential reach the API: the break-glass
// token (the replicated admin token), an API key (for automation, scoped
// by role and organization), and a person's access token issued to the
// built-in client ClientID after a sign-in that met the node's admin acr,
// whose subject holds a grant. Each resolves to one Credential before any
// route runs; what the route may then do is decided from its Role and
// OrgID alone.

// Roles a grant or an API key carries.
const (
	// RoleAdmin may do everything: grants, keys, cluster, directories,
	// backups. The break-glass token acts as RoleAdmin.
	RoleAdmin = "admin"
	// RoleOrgAdmin reads and changes one organization (OrgID), its
	// memberships, clients and the people who belong to it alone.
	RoleOrgAdmin = "org_admin"
	// RoleAuditor reads everything and writes nothing.
	RoleAuditor = "auditor"
)

// Credential kinds, as detail.credential.kind in the audit trail names
// them.
const (
	CredentialToken  = "token"
	CredentialAPIKey = "api_key"
	CredentialPerson = "person"
)

// ClientID is the built-in public client through which people sign in to
// the console and the CLI (code flow with PKCE).
const ClientID = "oidcd-admin"

// Credential is the resolved identity of an admin request.
type Credential struct {
	Kind  string // CredentialToken, CredentialAPIKey or CredentialPerson
	ID    string // the API key's id (CredentialAPIKey)
	Sub   string // the person's user id (CredentialPerson)
	Role  string // RoleAdmin, RoleOrgAdmin or RoleAuditor
	OrgID string // the organization of a RoleOrgAdmin; empty otherwise

	// Of an API key: when it expires, and how many keys its line holds,
	// itself and the keys that made it (fsm.APIKeyLineage), which bound
	// the keys it may make (recordMaker).
	keyExpires time.Time
	keyDepth   int
}

// PersonToken is what the provider says of a bearer access token: whose
// it is, which client it was issued to and how strongly the person signed
// in. Active is false for a token the provider does not honour now
// (malformed, expired, revoked, its session ended).
type PersonToken struct {
	Active   bool
	Sub      string
	ClientID string
	ACR      string
}

// PersonTokens checks access tokens issued by this provider (package
// oidc, adapted by node): the check is linearizable, like the protocol's
// own bearer checks, so a token revoked anywhere is refused here at once.
type PersonTokens interface {
	Check(ctx context.Context, token string) (PersonToken, error)
}

type credentialKey struct{}

// WithCredential returns ctx carrying c.
func WithCredential(ctx context.Context, c Credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// CredentialFrom returns the credential the request was authenticated
// with.
func CredentialFrom(ctx context.Context) (Credential, bool) {
	c, ok := ctx.Value(credentialKey{}).(Credential)
	return c, ok
}
