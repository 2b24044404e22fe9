package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Format is a state format: the command types and record fields a node
// applies, one integer that rises with each release that adds any. A
// cluster runs the format stored in its state (StateFormat), which the
// leader raises (SetStateFormat) only once every member of the raft
// configuration announces that it applies the higher one; a command or a
// field newer than the cluster's format is never proposed (CheckFormat).
// So a cluster of mixed versions behaves as one of its oldest member.
type Format uint16

const (
	// FormatBase is the format of oidcd 0.3.0 and every release before
	// it: every command type up to TypeSetBranding with the fields those
	// releases wrote. A member that announces no format (a release before
	// the gate) is taken to run it, and so is a state without a stored
	// format.
	FormatBase Format = 1
	// FormatGate adds set_state_format, the command that raises the
	// cluster's format.
	FormatGate Format = 2
	// FormatTrail moves the audit trail out of the replicated state into
	// each node's local trail (package trail; audit_trail.go): from the
	// apply of the SetStateFormat that reaches it, events are staged in
	// the audit bucket without an index, retention moves a replicated
	// floor over whole chunks, and the migration drops the index. No
	// command type or field comes with it: a node of an older format
	// applies every entry a cluster at format 2 is sent, and the leader
	// raises the format only once every member applies it, so every
	// replica changes layout at the same log index.
	FormatTrail Format = 3

	// CurrentFormat is the newest format this build applies and
	// announces. A node that installs a snapshot of format 3 lacks the
	// events its peers moved out (FSM.TrailGap); node fetches them from
	// a peer (cluster.FetchTrail: ExportTrail there, ImportTrail here).
	CurrentFormat = FormatTrail
)

// formatReleases names the first release of each format, for the messages
// that ask for an upgrade. A format this build does not know is named by
// the version its SetStateFormat carries.
var formatReleases = map[Format]string{
	FormatBase:  "0.3.0",
	FormatGate:  "0.4.0",
	FormatTrail: "0.5.0",
}

// FormatRelease is the first release that applies format f ("" when
// this build does not know f).
func FormatRelease(f Format) string { return formatReleases[f] }

// commandDecl declares a command type: the Go type its payload decodes
// into and the format that introduced it.
type commandDecl struct {
	payload reflect.Type
	since   Format
}

func declare[T any](since Format) commandDecl {
	return commandDecl{payload: reflect.TypeFor[T](), since: since}
}

// commandFormats is the one place that says which format introduced each
// command type. A type registered without a line here fails
// TestEveryCommandAndFieldHasAFormat, and so does a field of its payload
// (or of a record) that is neither in testdata/format-base-fields.txt,
// the fields of FormatBase, nor in fieldFormats.
var commandFormats = map[Type]commandDecl{
	TypeSetAdminToken:      declare[SetAdminToken](FormatBase),
	TypeCreateOrg:          declare[CreateOrg](FormatBase),
	TypeDeleteOrg:          declare[DeleteOrg](FormatBase),
	TypeCreateUser:         declare[CreateUser](FormatBase),
	TypeUpdateUser:         declare[UpdateUser](FormatBase),
	TypeDeleteUser:         declare[DeleteUser](FormatBase),
	TypeCreateMembership:   declare[CreateMembership](FormatBase),
	TypeUpdateMembership:   declare[UpdateMembership](FormatBase),
	TypeDeleteMembership:   declare[DeleteMembership](FormatBase),
	TypeCreateClient:       declare[PutClient](FormatBase),
	TypeUpdateClient:       declare[PutClient](FormatBase),
	TypeDeleteClient:       declare[DeleteClient](FormatBase),
	TypeAddKey:             declare[AddKey](FormatBase),
	TypeRemoveKey:          declare[RemoveKey](FormatBase),
	TypeNoop:               declare[struct{}](FormatBase),
	TypeStartSSOSession:    declare[StartSSOSession](FormatBase),
	TypeIssueCode:          declare[IssueCode](FormatBase),
	TypeRedeemCode:         declare[RedeemCode](FormatBase),
	TypeRevokeToken:        declare[RevokeToken](FormatBase),
	TypeEndSSOSession:      declare[EndSSOSession](FormatBase),
	TypeReap:               declare[Reap](FormatBase),
	TypeSetSecret:          declare[SetSecret](FormatBase),
	TypeDeliveryOutcome:    declare[DeliveryOutcome](FormatBase),
	TypeSetTOTP:            declare[SetTOTP](FormatBase),
	TypeUseTOTP:            declare[UseTOTP](FormatBase),
	TypeSetRecoveryCodes:   declare[SetRecoveryCodes](FormatBase),
	TypeUseRecoveryCode:    declare[UseRecoveryCode](FormatBase),
	TypeAddPasskey:         declare[AddPasskey](FormatBase),
	TypeUsePasskey:         declare[UsePasskey](FormatBase),
	TypeRemovePasskey:      declare[RemovePasskey](FormatBase),
	TypePutChallenge:       declare[PutChallenge](FormatBase),
	TypeTakeChallenge:      declare[TakeChallenge](FormatBase),
	TypeIssueSMSCode:       declare[IssueSMSCode](FormatBase),
	TypeCheckSMSCode:       declare[CheckSMSCode](FormatBase),
	TypeThrottleHit:        declare[ThrottleHit](FormatBase),
	TypeThrottleClear:      declare[ThrottleClear](FormatBase),
	TypeStepUpSSOSession:   declare[StepUpSSOSession](FormatBase),
	TypeThrottleReserve:    declare[ThrottleReserve](FormatBase),
	TypeAuditEvent:         declare[Event](FormatBase),
	TypeRevokeConsent:      declare[RevokeConsent](FormatBase),
	TypeImportUsers:        declare[ImportUsers](FormatBase),
	TypeRehashPassword:     declare[RehashPassword](FormatBase),
	TypePutDirectory:       declare[PutDirectory](FormatBase),
	TypeDeleteDirectory:    declare[DeleteDirectory](FormatBase),
	TypeDirectorySignIn:    declare[DirectorySignIn](FormatBase),
	TypeDirectorySyncBatch: declare[DirectorySyncBatch](FormatBase),
	TypeCreateAdminGrant:   declare[CreateAdminGrant](FormatBase),
	TypeDeleteAdminGrant:   declare[DeleteAdminGrant](FormatBase),
	TypeCreateAPIKey:       declare[CreateAPIKey](FormatBase),
	TypeDeleteAPIKey:       declare[DeleteAPIKey](FormatBase),
	TypeEnqueueEmail:       declare[EnqueueEmail](FormatBase),
	TypeEmailOutcome:       declare[EmailOutcome](FormatBase),
	TypeUpdateOrg:          declare[UpdateOrg](FormatBase),
	TypeIssueLink:          declare[IssueLink](FormatBase),
	TypeCreateInvitation:   declare[CreateInvitation](FormatBase),
	TypeDeleteInvitation:   declare[DeleteInvitation](FormatBase),
	TypeUseLink:            declare[UseLink](FormatBase),
	TypeSetBranding:        declare[SetBranding](FormatBase),

	TypeSetStateFormat: declare[SetStateFormat](FormatGate),

	TypePutIdentityProvider:    declare[PutIdentityProvider](FormatGate),
	TypeDeleteIdentityProvider: declare[DeleteIdentityProvider](FormatGate),
	TypeFederatedSignIn:        declare[FederatedSignIn](FormatGate),
	TypeUnlinkIdentity:         declare[UnlinkIdentity](FormatGate),
	TypeUpstreamLogout:         declare[UpstreamLogout](FormatGate),
}

// fieldFormats declares each field added after FormatBase to a payload or
// a record, as "GoType.GoField" (the struct's and the field's Go names),
// with the format that introduced it. A proposer that sets such a field
// (a non-zero value) needs that format: NewCommand records it in
// Command.Need, and CheckFormat refuses the command while the cluster
// runs an older one, so no node ever drops a field another one keeps.
var fieldFormats = map[string]Format{
	"SetStateFormat.Format":  FormatGate,
	"SetStateFormat.Version": FormatGate,
	"APIKey.MakerKind":       FormatGate, // who made an API key (grant.go)
	"APIKey.MakerID":         FormatGate,
	"Client.ApplicationType": FormatGate, // native apps (client.go)
	"Client.WebOrigins":      FormatGate, // CORS origins (client.go)
	"Client.WebOriginsSet":   FormatGate,
	// Federation (federation.go): the link and upstream session that
	// opened an SSO session, and the provider that granted a membership.
	"SSOSession.IdentityID":      FormatGate,
	"SSOSession.ProviderID":      FormatGate,
	"SSOSession.UpstreamSID":     FormatGate,
	"SSOSession.UpstreamIDToken": FormatGate,
	"Membership.ProviderID":      FormatGate,
}

// wholeTypes are the payloads and records a format introduced whole:
// every field of each is declared in fieldFormats with that format (init
// below), so a new command's payload is not listed field by field.
var wholeTypes = []struct {
	t     reflect.Type
	since Format
}{
	{reflect.TypeFor[PutIdentityProvider](), FormatGate},
	{reflect.TypeFor[DeleteIdentityProvider](), FormatGate},
	{reflect.TypeFor[FederatedSignIn](), FormatGate},
	{reflect.TypeFor[UnlinkIdentity](), FormatGate},
	{reflect.TypeFor[UpstreamLogout](), FormatGate},
	{reflect.TypeFor[IdentityProvider](), FormatGate},
	{reflect.TypeFor[ProviderMemberships](), FormatGate},
	{reflect.TypeFor[Identity](), FormatGate},
}

func init() {
	for _, w := range wholeTypes {
		for i := range w.t.NumField() {
			fieldFormats[w.t.Name()+"."+w.t.Field(i).Name] = w.since
		}
	}
}

// SinceFormat is the format that introduced command type t (0 for a type
// this build does not know).
func SinceFormat(t Type) Format { return commandFormats[t].since }

// CommandsSince lists the command types introduced after format f, in
// type order: the ones a mixed cluster at f must not be sent.
func CommandsSince(f Format) []Type {
	var out []Type
	for t, d := range commandFormats {
		if d.since > f {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// FieldsSince lists the fields ("GoType.GoField") introduced after f.
func FieldsSince(f Format) []string {
	var out []string
	for k, v := range fieldFormats {
		if v > f {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// FieldFormat is the format that introduced field ("GoType.GoField"),
// FormatBase for one FormatBase already had, 0 when fieldFormats does
// not name it (the caller must know it is a base field).
func FieldFormat(field string) Format { return fieldFormats[field] }

// need is the format a command of type t with payload v needs: its type's,
// or that of the newest declared field v sets, whichever is later.
func need(t Type, v any) (Format, string) {
	f, feature := commandFormats[t].since, ""
	if f > FormatBase {
		feature = t.String()
	}
	if len(fieldFormats) == 0 || v == nil {
		return f, feature
	}
	if nf, name := valueNeed(reflect.ValueOf(v), fieldFormats); nf > f {
		f, feature = nf, name
	}
	return f, feature
}

// planCache holds, per struct type, where its declared fields are (nil
// when none is below it), so a payload without any costs one map lookup.
var planCache sync.Map // reflect.Type -> *fieldPlan

type fieldPlan struct {
	fields []plannedField
}

type plannedField struct {
	index int
	name  string // GoType.GoField
	since Format // 0: not declared itself, only something below it
	sub   reflect.Type
}

// valueNeed walks v for declared fields that are set and returns the
// newest format among them with its field's name.
func valueNeed(v reflect.Value, decl map[string]Format) (Format, string) {
	var best Format
	var name string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice, reflect.Array:
			if !containsDeclared(v.Type().Elem(), decl) {
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			if !containsDeclared(v.Type().Elem(), decl) {
				return
			}
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		case reflect.Struct:
			p := planFor(v.Type(), decl)
			if p == nil {
				return
			}
			for _, pf := range p.fields {
				fv := v.Field(pf.index)
				if pf.since > best && !fv.IsZero() {
					best, name = pf.since, pf.name
				}
				if pf.sub != nil {
					walk(fv)
				}
			}
		}
	}
	walk(v)
	return best, name
}

func containsDeclared(t reflect.Type, decl map[string]Format) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && planFor(t, decl) != nil
}

// planFor builds (once per type, for the real declarations) the plan of t.
func planFor(t reflect.Type, decl map[string]Format) *fieldPlan {
	real := isRealDecl(decl)
	if real {
		if p, ok := planCache.Load(t); ok {
			return p.(*fieldPlan)
		}
	}
	p := buildPlan(t, decl, map[reflect.Type]bool{})
	if real {
		planCache.Store(t, p)
	}
	return p
}

func isRealDecl(decl map[string]Format) bool {
	return reflect.ValueOf(decl).UnsafePointer() == reflect.ValueOf(fieldFormats).UnsafePointer()
}

func buildPlan(t reflect.Type, decl map[string]Format, seen map[reflect.Type]bool) *fieldPlan {
	if seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	var p fieldPlan
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		pf := plannedField{index: i, name: t.Name() + "." + sf.Name, since: decl[t.Name()+"."+sf.Name]}
		if pf.since <= FormatBase {
			pf.since = 0
		}
		et := sf.Type
		for et.Kind() == reflect.Pointer || et.Kind() == reflect.Slice || et.Kind() == reflect.Array || et.Kind() == reflect.Map {
			et = et.Elem()
		}
		if et.Kind() == reflect.Struct && buildPlan(et, decl, seen) != nil {
			pf.sub = et
		}
		if pf.since != 0 || pf.sub != nil {
			p.fields = append(p.fields, pf)
		}
	}
	if len(p.fields) == 0 {
		return nil
	}
	return &p
}

// FormatError refuses a command that needs a newer state format than the
// cluster runs: some member of the raft configuration could not apply it
// exactly. Nothing was proposed. Members, when the proposer knows them,
// are those that announce an older format ("id (version)").
type FormatError struct {
	Feature string // the command type or field that needs Need
	Need    Format
	Have    Format   // the cluster's format
	Members []string // the members to upgrade first, when known
}

// ErrFormat is what errors.Is finds in a FormatError.
var ErrFormat = errors.New("fsm: the cluster's state format is older than the command needs")

func (e *FormatError) Error() string {
	s := fmt.Sprintf("%s needs state format %d", e.Feature, e.Need)
	if v := FormatRelease(e.Need); v != "" {
		s += " (oidcd " + v + " or newer on every node)"
	}
	s += fmt.Sprintf("; the cluster runs format %d", e.Have)
	if len(e.Members) > 0 {
		s += "; upgrade first: " + strings.Join(e.Members, ", ")
	}
	return s
}

// Unwrap makes errors.Is(err, ErrFormat) hold.
func (e *FormatError) Unwrap() error { return ErrFormat }

// CheckFormat refuses cmd (a *FormatError) when it needs a newer format
// than the state's. A command built by NewCommand knows what it needs; a
// decoded one is judged by its type alone. Commands of FormatBase, nearly
// every write, cost no read.
func (s *State) CheckFormat(cmd Command) error {
	n, feature := cmd.Need, cmd.Feature
	if n == 0 {
		n = SinceFormat(cmd.Type)
	}
	if n <= FormatBase {
		return nil
	}
	if feature == "" {
		feature = cmd.Type.String()
	}
	if have := s.StateFormat(); n > have {
		return &FormatError{Feature: feature, Need: n, Have: have}
	}
	return nil
}

// StateFormat is the format the cluster runs, as this node's state holds
// it: FormatBase until the leader first raises it.
func (s *State) StateFormat() Format { return Format(s.f.format.Load()) }

// StateFormatVersion is the version the last SetStateFormat named: the
// lowest member's when the format was raised ("" before).
func (s *State) StateFormatVersion() string {
	var v string
	_ = s.f.view(func(tx *bolt.Tx) error {
		v = string(tx.Bucket(bucketMeta).Get(keyStateFormatVersion))
		return nil
	})
	return v
}

// SetStateFormat raises the cluster's state format to Format; the leader
// proposes it once every member of the raft configuration announces that
// it applies Format. Version is the lowest of their versions, so a node
// that does not know Format can say which release it needs. A lower or
// equal format changes nothing: a format never goes down.
type SetStateFormat struct {
	Format  Format `json:"format"`
	Version string `json:"version"`
}

// NewerFormatError stops a node that meets a state format it does not
// apply (a data dir, a snapshot or a log entry): it changes nothing and
// says which release it needs.
type NewerFormatError struct {
	Format  Format // the format met
	Version string // the release that wrote it, when known
	Where   string // "the data dir", "a snapshot", "log entry 42"
}

func (e *NewerFormatError) Error() string {
	v := e.Version
	if v == "" {
		v = "a newer release"
	}
	return fmt.Sprintf("fsm: %s holds state format %d, written by oidcd %s; this build (format %d, up to oidcd %s) cannot apply it: "+
		"run oidcd %s or newer on this node (it stopped before changing anything)",
		e.Where, e.Format, v, CurrentFormat, formatReleases[CurrentFormat], v)
}

// Unwrap makes errors.Is(err, ErrNewerFormat) hold.
func (e *NewerFormatError) Unwrap() error { return ErrNewerFormat }

// ErrNewerFormat is what errors.Is finds in a NewerFormatError.
var ErrNewerFormat = errors.New("fsm: state of a newer format")

var (
	keyStateFormat        = []byte("state_format")
	keyStateFormatVersion = []byte("state_format_version")
)

// getFormat reads the stored state format (FormatBase when none is).
func getFormat(tx *bolt.Tx) (Format, string) {
	meta := tx.Bucket(bucketMeta)
	v := meta.Get(keyStateFormat)
	if v == nil {
		return FormatBase, ""
	}
	n, err := strconv.ParseUint(string(v), 10, 16)
	if err != nil || n == 0 {
		return Format(1<<16 - 1), "" // unreadable: as unknown as it gets
	}
	return Format(n), string(meta.Get(keyStateFormatVersion))
}

// checkFormat refuses a state file of a format this build cannot apply.
func checkFormat(tx *bolt.Tx, where string) error {
	if f, v := getFormat(tx); f > CurrentFormat {
		return &NewerFormatError{Format: f, Version: v, Where: where}
	}
	return nil
}

func init() { register(TypeSetStateFormat, applySetStateFormat) }

func applySetStateFormat(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[SetStateFormat](p)
	have, _ := getFormat(tx)
	if c.Format <= have {
		return Result{Value: have}
	}
	if have < FormatTrail && c.Format >= FormatTrail {
		migrateToTrail(tx)
	}
	meta := tx.Bucket(bucketMeta)
	if err := meta.Put(keyStateFormat, []byte(strconv.Itoa(int(c.Format)))); err != nil {
		panic(fmt.Sprintf("fsm: put state format: %v", err))
	}
	if err := meta.Put(keyStateFormatVersion, []byte(c.Version)); err != nil {
		panic(fmt.Sprintf("fsm: put state format: %v", err))
	}
	return Result{Value: c.Format}
}

// peekNewerFormat reports the SetStateFormat of entry data that raises the
// format beyond this build's, before anything of it is applied.
func peekNewerFormat(cmd Command, index uint64) error {
	if cmd.Type != TypeSetStateFormat {
		return nil
	}
	c := decode[SetStateFormat](cmd.Payload)
	if c.Format > CurrentFormat {
		return &NewerFormatError{Format: c.Format, Version: c.Version, Where: "log entry " + strconv.FormatUint(index, 10)}
	}
	return nil
}

// halt stops this replica for good (until a build that applies the
// format starts on the same data): it logs nothing itself, and tells
// OnHalt once.
func (f *FSM) halt(e *NewerFormatError) {
	if f.halted.CompareAndSwap(nil, e) && f.OnHalt != nil {
		f.OnHalt(e)
	}
}

// Halted is the error that stopped this replica (nil while it applies).
func (f *FSM) Halted() error {
	if h := f.halted.Load(); h != nil {
		return h
	}
	return nil
}

func haltedResults(n int, e *NewerFormatError) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = Result{Err: e}
	}
	return out
}

// loadFormat reads the stored format into f.format.
func (f *FSM) loadFormat(db *bolt.DB) {
	_ = db.View(func(tx *bolt.Tx) error {
		v, _ := getFormat(tx)
		f.format.Store(uint32(v))
		return nil
	})
}
