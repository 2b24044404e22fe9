package node

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/signin"
)

// Secrets at rest. With --kek-file, every secret this node proposes
// (signing keys, the browser key, TOTP secrets) is sealed under the KEK
// before it reaches raft, so the raft log, the state file and snapshots
// hold ciphertext only; every node of a cluster loads the same KEK.
// Without --kek-file they are stored in kek's clear form and a warning is
// logged at start. A node refuses to start when its state holds a secret
// it cannot open with its KEK (none, or another one).

// loadKEK reads --kek-file; nil (and a warning) when none is given. With
// --demo the warning is a note: a demo on a laptop needs no KEK, and its
// banner says what production needs (demoBanner).
func loadKEK(path string, demo bool, log *slog.Logger) (*kek.KEK, error) {
	if path == "" && demo {
		log.Info("demo: no --kek-file, so signing keys and other secrets are stored unencrypted in the data directory; in production give --kek-file (SECURITY.md, \"Secrets at rest\")")
		return nil, nil
	}
	if path == "" {
		log.Warn("no --kek-file: signing keys and other secrets are stored in the clear in the raft log, the state file and snapshots")
		return nil, nil
	}
	k, err := kek.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--kek-file: %w", err)
	}
	log.Info("secrets at rest are sealed under the key-encryption key", "kek_id", k.ID())
	return k, nil
}

// checkSecrets opens every stored secret with this node's KEK. An error
// wraps kek.ErrNoKEK, kek.ErrWrongKEK or kek.ErrInvalid and says which key
// the state needs. Secrets stored in the clear although a KEK is given
// (written before it was) are only logged, and so are an --admin-token and
// a token file that the replicated admin token no longer matches
// (noteAdminToken): the state's token is the one that works.
func (n *Node) checkSecrets() error {
	fail := func(err error) error {
		return fmt.Errorf("--kek-file: %s holds secrets this node cannot open: %w", filepath.Join(n.cfg.DataDir, "state.db"), err)
	}
	clearKeys, err := n.keys.CheckStored()
	if err != nil {
		return fail(err)
	}
	clearBrowser, err := n.sessions.CheckBrowserKey()
	if err != nil {
		return fail(err)
	}
	clearTOTP, err := signin.CheckFactorSecrets(n.fsm.State(), n.kek)
	if err != nil {
		return fail(err)
	}
	if n.kek != nil && clearTOTP > 0 {
		n.log.Warn("authenticator-app secrets enrolled before --kek-file was given stay in the clear until re-enrolled", "clear_totp_secrets", clearTOTP)
	}
	if n.kek != nil && (clearKeys > 0 || clearBrowser) {
		n.log.Warn("some secrets were stored before --kek-file was given and stay in the clear: signing keys until rotated out (oidcd admin keys rotate), the browser key for good",
			"clear_signing_keys", clearKeys, "clear_browser_key", clearBrowser)
	}
	if h, err := n.fsm.State().AdminTokenHash(); err == nil {
		n.noteAdminToken(h)
	}
	return nil
}
