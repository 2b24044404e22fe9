package oidc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
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

// OpenBrowserKey returns the browser key from its stored form
// (authn.OpenBrowserKey): a kek record, sealed or clear, or the bare 32
// bytes written before secrets were sealed.
func OpenBrowserKey(k *kek.KEK, stored []byte) ([]byte, error) {
	key, err := authn.OpenBrowserKey(k, stored, BrowserKeyAAD)
	if err != nil {
		return nil, fmt.Errorf("oidc: %w", err)
	}
	return key, nil
}

// EnsureBrowserKey creates the browser key when the state holds none; a
// concurrent creation by another leader wins harmlessly (the first value
// stands).
func EnsureBrowserKey(ctx context.Context, st *fsm.State, a Applier, k *kek.KEK) error {
	if _, err := st.Secret(fsm.SecretBrowserKey); err == nil {
		return nil
	}
	key := make([]byte, seal.KeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	sealed, err := k.Seal(key, BrowserKeyAAD)
	if err != nil {
		return err
	}
	_, err = a.Apply(ctx, fsm.MustCommand(fsm.TypeSetSecret, fsm.SetSecret{Name: fsm.SecretBrowserKey, Value: sealed}))
	return err
}

// CheckBrowserKey opens the stored browser key with k, so a node can
// refuse to start when it could not (no --kek-file, or another one than
// the cluster's). clear reports a key stored in the clear (written before
// a KEK was given; it stays so).
func CheckBrowserKey(st *fsm.State, k *kek.KEK) (clear bool, err error) {
	stored, err := st.Secret(fsm.SecretBrowserKey)
	if errors.Is(err, fsm.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := OpenBrowserKey(k, stored); err != nil {
		return false, err
	}
	return len(stored) == seal.KeySize || !kek.Sealed(stored), nil
}
