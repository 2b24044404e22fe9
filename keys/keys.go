package keys

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
)

// Policy defaults and floors.
const (
	// DefaultPublishLead is how long a new key is published before it signs.
	DefaultPublishLead = 10 * time.Minute
	// MinPublishLead exceeds the JWKS cache lifetime (max-age=300), so every
	// relying party has seen a key before the first token it signs.
	MinPublishLead = 301 * time.Second
	// DefaultRetention is how long a retired key stays published.
	DefaultRetention = 60 * time.Minute
	// MinRetention is the floor: a retired key stays published at least
	// 60 minutes after a rotation.
	MinRetention = 60 * time.Minute
	// DefaultRotateEvery is the scheduled rotation period.
	DefaultRotateEvery = 30 * 24 * time.Hour
	// TickEvery is the period of the leader loop (Run).
	TickEvery = 30 * time.Second
	// MaxTokenSize bounds the tokens Verify accepts; ours are far smaller.
	MaxTokenSize = 16 << 10
)

// Key states, as reported by List and Rotate.
const (
	StateNext    = "next"
	StateActive  = "active"
	StateRetired = "retired"
)

// Token types for the typ header.
const (
	TypJWT    = "JWT"
	TypLogout = "logout+jwt"
)

var (
	// ErrNoKey reports that no key is active (signing) or, for JWKS and
	// PublicSet, that no key is published yet.
	ErrNoKey = errors.New("keys: no signing key")
	// ErrInvalidToken wraps every reason Verify rejects a token.
	ErrInvalidToken = errors.New("keys: invalid token")
	// ErrUnknownKey (with ErrInvalidToken) says the token names a key this
	// node does not publish: forged, long retired, or rotated in a moment
	// ago through another node that this one has not applied yet.
	ErrUnknownKey = errors.New("keys: key not published here")
)

// Applier is the write path (fsm.Applier): cluster.Cluster in
// production, fsmtest.Applier in tests.
type Applier = fsm.Applier

// Signer signs claims with the active key. claims is anything that encodes
// to a JSON object (a map, a struct, a json.RawMessage).
type Signer interface {
	Sign(claims any, typ string) ([]byte, error)
}

// Verifier checks a token's signature against the published keys.
type Verifier interface {
	Verify(token []byte) ([]byte, error)
}

var (
	_ Signer   = (*Manager)(nil)
	_ Verifier = (*Manager)(nil)
)

// Config configures a Manager. State and Applier are required.
type Config struct {
	State   *fsm.State
	Applier Applier
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Logger receives rotation and clamp messages; discarded when nil.
	Logger *slog.Logger
	// PublishLead is how long a new key is published before it signs.
	// Default DefaultPublishLead; raised to MinPublishLead if lower.
	PublishLead time.Duration
	// Retention is how long a retired key stays published. Default and
	// floor MinRetention.
	Retention time.Duration
	// RotateEvery is the scheduled rotation period (flag --key-rotation),
	// counted from the activation of the current key. Default
	// DefaultRotateEvery; raised to PublishLead if lower.
	RotateEvery time.Duration
	// KEK seals private keys before they are proposed (--kek-file), with
	// the additional data PrivateKeyAAD(kid). Nil: they are stored in
	// kek's clear form.
	KEK *kek.KEK
}

// PrivateKeyAAD names a signing key's private part for kek.Seal and
// kek.Open, so that a sealed key cannot be passed off as another kid's.
func PrivateKeyAAD(kid string) string { return "signing_key/" + kid }

// Info describes one published key.
type Info struct {
	Kid         string     `json:"kid"`
	State       string     `json:"state"`
	CreatedAt   time.Time  `json:"created_at"`
	ActivatesAt *time.Time `json:"activates_at,omitempty"`
	RetiredAt   *time.Time `json:"retired_at,omitempty"`
}

// Manager signs with, publishes and rotates the signing keys of one node.
// It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	snap   atomic.Pointer[snapshot]
	mu     sync.Mutex    // serializes reloads of snap
	gen    atomic.Uint64 // bumped by OnApply when the key set may have changed
	hooked atomic.Bool   // OnApply has been called at least once
}

// New returns a Manager for cfg, with defaults filled in and the policy
// durations clamped to their floors (each clamp is logged).
func New(cfg Config) *Manager {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if cfg.PublishLead == 0 {
		cfg.PublishLead = DefaultPublishLead
	}
	if cfg.PublishLead < MinPublishLead {
		log.Warn("key publish lead below the JWKS cache lifetime; clamped",
			"requested", cfg.PublishLead, "used", MinPublishLead)
		cfg.PublishLead = MinPublishLead
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Retention < MinRetention {
		log.Warn("retired key retention below 60 minutes; clamped",
			"requested", cfg.Retention, "used", MinRetention)
		cfg.Retention = MinRetention
	}
	if cfg.RotateEvery == 0 {
		cfg.RotateEvery = DefaultRotateEvery
	}
	if cfg.RotateEvery < cfg.PublishLead {
		log.Warn("key rotation period below the publish lead; clamped",
			"requested", cfg.RotateEvery, "used", cfg.PublishLead)
		cfg.RotateEvery = cfg.PublishLead
	}
	cfg.Logger, cfg.Now = log, now
	return &Manager{cfg: cfg, log: log, now: now}
}

// OnApply tells the Manager which command types the FSM just applied; wire
// it into fsm.FSM.OnApply. Once it has been called, the Manager rereads the
// key set only after AddKey or RemoveKey (and after a restore). Until then
// it falls back to rereading the key set whenever the applied index moved,
// which is correct but costs a bbolt read after every write. It must not
// block, and does not.
func (m *Manager) OnApply(types []fsm.Type) {
	if !m.hooked.Load() {
		// Changes applied before the hook was installed were not
		// announced: force one reread. gen is bumped before hooked is set;
		// fresh reads them in the opposite order.
		m.gen.Add(1)
		m.hooked.Store(true)
		return
	}
	for _, t := range types {
		if t == fsm.TypeAddKey || t == fsm.TypeRemoveKey {
			m.gen.Add(1)
			return
		}
	}
}
