package session

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/seal"
)

// The browser key: one cluster-wide key that seals browser state (the
// pending sign-in carried in each step's hidden input), so that any node
// can continue a sign-in another began. It is created once by a leader
// (EnsureBrowserKey), sealed under the KEK before it is proposed, and
// opened by every node at start (CheckBrowserKey) and on first use.

// BrowserKeyAAD is the additional data the browser key is sealed with
// (kek.Seal) before it is replicated.
const BrowserKeyAAD = "secret/" + fsm.SecretBrowserKey

// ErrNoBrowserKey: the cluster-wide browser key has not been replicated
// yet (a node that just started); pages answer 503.
var ErrNoBrowserKey = errors.New("browser key not available yet")

// OpenBrowserKey returns the browser key from its stored form: a kek
// record sealed with BrowserKeyAAD (sealed, or clear without a KEK), or
// the bare 32 bytes written before secrets were sealed (its kek record,
// clear or sealed, is never 32 bytes long).
func OpenBrowserKey(k *kek.KEK, stored []byte) ([]byte, error) {
	if len(stored) == seal.KeySize {
		return stored, nil
	}
	key, err := k.Open(stored, BrowserKeyAAD)
	if err != nil {
		return nil, fmt.Errorf("session: open browser key: %w", err)
	}
	return key, nil
}

// BrowserKey returns the cluster's 32-byte browser key, opened with this
// node's KEK; ErrNoBrowserKey while the state holds none.
func (m *Manager) BrowserKey() ([]byte, error) {
	stored, err := m.state.Secret(fsm.SecretBrowserKey)
	if err != nil {
		return nil, ErrNoBrowserKey
	}
	return OpenBrowserKey(m.kek, stored)
}

// EnsureBrowserKey creates the browser key when the state holds none; a
// concurrent creation by another leader wins harmlessly (the first value
// stands). The leader runs it.
func (m *Manager) EnsureBrowserKey(ctx context.Context, a fsm.Applier) error {
	if _, err := m.state.Secret(fsm.SecretBrowserKey); err == nil {
		return nil
	}
	key := make([]byte, seal.KeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	sealed, err := m.kek.Seal(key, BrowserKeyAAD)
	if err != nil {
		return err
	}
	_, err = a.Apply(ctx, fsm.MustCommand(fsm.TypeSetSecret, fsm.SetSecret{Name: fsm.SecretBrowserKey, Value: sealed}))
	return err
}

// CheckBrowserKey opens the stored browser key with this node's KEK, so a
// node can refuse to start when it could not (no --kek-file, or another
// one than the cluster's). clear reports a key stored in the clear
// (written before a KEK was given; it stays so).
func (m *Manager) CheckBrowserKey() (clear bool, err error) {
	stored, err := m.state.Secret(fsm.SecretBrowserKey)
	if errors.Is(err, fsm.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := OpenBrowserKey(m.kek, stored); err != nil {
		return false, err
	}
	return len(stored) == seal.KeySize || !kek.Sealed(stored), nil
}

// sealer is the Box for browser state, built on first use from the key
// load returns (load answers ErrNoBrowserKey until the key is
// replicated).
type sealer struct {
	load func() ([]byte, error)
	mu   sync.Mutex
	b    *seal.Box
}

func (s *sealer) box() (*seal.Box, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b != nil {
		return s.b, nil
	}
	key, err := s.load()
	if err != nil {
		return nil, err
	}
	b, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	s.b = b
	return b, nil
}
