package signin

import (
	"fmt"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/kek"
)

// CheckFactorSecrets opens every stored authenticator-app secret with k,
// so a node can refuse to start when it could not (no --kek-file, or
// another one than the cluster's). clear counts the secrets stored in the
// clear (enrolled before a KEK was given; they stay so until re-enrolled).
func CheckFactorSecrets(st *fsm.State, k *kek.KEK) (clear int, err error) {
	err = st.TOTPSecrets(func(userID string, sealed []byte) error {
		if _, err := k.Open(sealed, factor.TOTPAAD(userID)); err != nil {
			return fmt.Errorf("authenticator secret of %s: %w", userID, err)
		}
		if !kek.Sealed(sealed) {
			clear++
		}
		return nil
	})
	return clear, err
}
