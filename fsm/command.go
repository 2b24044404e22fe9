package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Type names a command kind. Values are persisted in the raft log: never
// renumber or reuse one.
type Type uint8

// Command types. Append only.
const (
	TypeInvalid Type = iota
	TypeSetAdminToken
	TypeCreateOrg
	TypeDeleteOrg
	TypeCreateUser
	TypeUpdateUser
	TypeDeleteUser
	TypeCreateMembership
	TypeUpdateMembership
	TypeDeleteMembership
	TypeCreateClient
	TypeUpdateClient
	TypeDeleteClient
	TypeAddKey
	TypeRemoveKey
	TypeNoop
	TypeStartSSOSession
	TypeIssueCode
	TypeRedeemCode
	TypeRevokeToken
	TypeEndSSOSession
	TypeReap
	TypeSetSecret
	TypeDeliveryOutcome
	TypeSetTOTP
	TypeUseTOTP
	TypeSetRecoveryCodes
	TypeUseRecoveryCode
	TypeAddPasskey
	TypeUsePasskey
	TypeRemovePasskey
	TypePutChallenge
	TypeTakeChallenge
	TypeIssueSMSCode
	TypeCheckSMSCode
	TypeThrottleHit
	TypeThrottleClear
	TypeStepUpSSOSession
	TypeThrottleReserve
	TypeAuditEvent
	TypeRevokeConsent
	TypeImportUsers
	TypeRehashPassword
	TypePutDirectory
	TypeDeleteDirectory
	TypeDirectorySignIn
	TypeDirectorySyncBatch
	TypeCreateAdminGrant
	TypeDeleteAdminGrant
	TypeCreateAPIKey
	TypeDeleteAPIKey
	TypeEnqueueEmail
	TypeEmailOutcome
	TypeUpdateOrg
	TypeIssueLink
	TypeCreateInvitation
	TypeDeleteInvitation
	TypeUseLink
	TypeSetBranding
	TypeSetStateFormat // FormatGate
	// Federation (federation.go), FormatGate.
	TypePutIdentityProvider
	TypeDeleteIdentityProvider
	TypeFederatedSignIn
	TypeUnlinkIdentity
	TypeUpstreamLogout
)

var typeNames = map[Type]string{
	TypeSetAdminToken:      "set_admin_token",
	TypeCreateOrg:          "create_org",
	TypeDeleteOrg:          "delete_org",
	TypeCreateUser:         "create_user",
	TypeUpdateUser:         "update_user",
	TypeDeleteUser:         "delete_user",
	TypeCreateMembership:   "create_membership",
	TypeUpdateMembership:   "update_membership",
	TypeDeleteMembership:   "delete_membership",
	TypeCreateClient:       "create_client",
	TypeUpdateClient:       "update_client",
	TypeDeleteClient:       "delete_client",
	TypeAddKey:             "add_key",
	TypeRemoveKey:          "remove_key",
	TypeNoop:               "noop",
	TypeStartSSOSession:    "start_sso_session",
	TypeIssueCode:          "issue_code",
	TypeRedeemCode:         "redeem_code",
	TypeRevokeToken:        "revoke_token",
	TypeEndSSOSession:      "end_sso_session",
	TypeReap:               "reap",
	TypeSetSecret:          "set_secret",
	TypeDeliveryOutcome:    "delivery_outcome",
	TypeSetTOTP:            "set_totp",
	TypeUseTOTP:            "use_totp",
	TypeSetRecoveryCodes:   "set_recovery_codes",
	TypeUseRecoveryCode:    "use_recovery_code",
	TypeAddPasskey:         "add_passkey",
	TypeUsePasskey:         "use_passkey",
	TypeRemovePasskey:      "remove_passkey",
	TypePutChallenge:       "put_challenge",
	TypeTakeChallenge:      "take_challenge",
	TypeIssueSMSCode:       "issue_sms_code",
	TypeCheckSMSCode:       "check_sms_code",
	TypeThrottleHit:        "throttle_hit",
	TypeThrottleClear:      "throttle_clear",
	TypeStepUpSSOSession:   "step_up_sso_session",
	TypeThrottleReserve:    "throttle_reserve",
	TypeAuditEvent:         "audit_event",
	TypeRevokeConsent:      "revoke_consent",
	TypeImportUsers:        "import_users",
	TypeRehashPassword:     "rehash_password",
	TypePutDirectory:       "put_directory",
	TypeDeleteDirectory:    "delete_directory",
	TypeDirectorySignIn:    "directory_sign_in",
	TypeDirectorySyncBatch: "directory_sync_batch",
	TypeCreateAdminGrant:   "create_admin_grant",
	TypeDeleteAdminGrant:   "delete_admin_grant",
	TypeCreateAPIKey:       "create_api_key",
	TypeDeleteAPIKey:       "delete_api_key",
	TypeEnqueueEmail:       "enqueue_email",
	TypeEmailOutcome:       "email_outcome",
	TypeUpdateOrg:          "update_org",
	TypeIssueLink:          "issue_link",
	TypeCreateInvitation:   "create_invitation",
	TypeDeleteInvitation:   "delete_invitation",
	TypeUseLink:            "use_link",
	TypeSetBranding:        "set_branding",
	TypeSetStateFormat:     "set_state_format",

	TypePutIdentityProvider:    "put_identity_provider",
	TypeDeleteIdentityProvider: "delete_identity_provider",
	TypeFederatedSignIn:        "federated_sign_in",
	TypeUnlinkIdentity:         "unlink_identity",
	TypeUpstreamLogout:         "upstream_logout",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// FlagIgnorable marks a command that a node which does not know its type may
// skip instead of panicking. Use it only for commands whose loss cannot make
// replicas diverge in a way that matters (hints, caches, statistics).
const FlagIgnorable uint8 = 1 << 7

// Command is the envelope of every replicated write.
type Command struct {
	Type    Type
	Flags   uint8
	Payload []byte
	// Audit is the proposer's stamp (Stamp sets it, with FlagAudited):
	// the payload is left as NewCommand encoded it. On the wire (Encode)
	// the stamp travels inside the payload, as the member "audit" of its
	// JSON object, where every version of oidcd reads it: a node of the
	// previous version applies a stamped entry of this one exactly as its
	// own, and the other way round. Decode leaves it there (Audit nil),
	// so Encode(Decode(b)) is b; apply reads it with stamp.
	Audit *Audit
	// Need is the state format the command needs, and Feature what needs
	// it (its type, or the newest declared field it sets): NewCommand
	// works them out from commandFormats and fieldFormats. Neither is on
	// the wire; CheckFormat judges a decoded command (Need 0) by its type.
	Need    Format
	Feature string
}

// NewCommand encodes v as the payload of a command of type t.
func NewCommand(t Type, v any) (Command, error) {
	p, err := json.Marshal(v)
	if err != nil {
		return Command{}, fmt.Errorf("fsm: encode %s: %w", t, err)
	}
	n, feature := need(t, v)
	return Command{Type: t, Payload: p, Need: n, Feature: feature}, nil
}

// MustCommand is NewCommand for payloads that cannot fail to encode (plain
// structs of strings, numbers and times).
func MustCommand(t Type, v any) Command {
	c, err := NewCommand(t, v)
	if err != nil {
		panic(err)
	}
	return c
}

// Encode returns the wire form: type byte, flag byte, payload (with the
// stamp added as its last member when Audit is set).
func (c Command) Encode() []byte {
	if c.Audit != nil {
		return stampedWire(c)
	}
	b := make([]byte, 2+len(c.Payload))
	b[0] = byte(c.Type)
	b[1] = c.Flags
	copy(b[2:], c.Payload)
	return b
}

// stampedWire is the wire form of a stamped command: the payload's JSON
// object with "audit" appended as its last member, spliced in without
// decoding the payload (Stamp checked that it is an object, or null,
// which stands for an empty one). A payload that already has an "audit"
// member (a decoded entry stamped again) keeps it before the new one,
// which is the one every JSON decoder of oidcd reads: the last.
func stampedWire(c Command) []byte {
	a, err := json.Marshal(c.Audit)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode audit stamp of %s: %v", c.Type, err)) // Stamp checked it encodes
	}
	body := bytes.TrimSpace(c.Payload)
	b := make([]byte, 0, 2+len(body)+len(`,"audit":`)+len(a)+1)
	b = append(b, byte(c.Type), c.Flags|FlagAudited)
	if len(body) < 2 || string(body) == "null" || len(bytes.TrimSpace(body[1:len(body)-1])) == 0 {
		b = append(b, '{')
	} else {
		b = append(b, body[:len(body)-1]...)
		b = append(b, ',')
	}
	b = append(b, `"audit":`...)
	b = append(b, a...)
	return append(b, '}')
}

// ErrMalformed reports a log entry that is not a command.
var ErrMalformed = errors.New("fsm: malformed command")

// Decode parses the wire form of a command.
func Decode(b []byte) (Command, error) {
	if len(b) < 2 {
		return Command{}, ErrMalformed
	}
	return Command{Type: Type(b[0]), Flags: b[1], Payload: b[2:]}, nil
}

// Result is what Apply returns for a command: a domain error (ErrConflict,
// ErrNotFound, ...) or a value for the proposer.
type Result struct {
	Value any
	Err   error
}
