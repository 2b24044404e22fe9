package keys

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// RSABits is the size of generated keys.
const RSABits = 2048

// Rotate generates a key on this node and adds it to the replicated set.
// Normally the key is next: published now, signing from now+PublishLead.
// With immediate (an emergency) it signs at once and drops any key that was
// still waiting to activate (fsm.AddKey.SupersedePending); the key it
// replaces stays published for Retention either way. Times come from this
// node's clock, so nodes whose clocks differ see the switch at slightly
// different instants.
func (m *Manager) Rotate(ctx context.Context, immediate bool) (Info, error) {
	now := m.now().UTC()
	activates := now.Add(m.cfg.PublishLead)
	if immediate {
		activates = now
		// A key activated at this very instant would tie with the new one,
		// and ties go by kid: step past it so the new key wins.
		stored, _, err := m.cfg.State.Keys()
		if err != nil {
			return Info{}, fmt.Errorf("keys: read key set: %w", err)
		}
		es := order(stored)
		if i := activeAt(es, now); i >= 0 && !es[i].activatesAt.Before(now) {
			activates = es[i].activatesAt.Add(time.Nanosecond)
		}
	}
	k, err := m.add(ctx, now, activates, immediate)
	if err != nil {
		return Info{}, err
	}
	in := Info{Kid: k.Kid, State: StateNext, CreatedAt: k.CreatedAt, ActivatesAt: &k.ActivatesAt}
	if immediate {
		in.State = StateActive
	}
	m.log.Info("signing key added", "kid", k.Kid, "state", in.State, "activates_at", k.ActivatesAt)
	return in, nil
}

// add generates a key and proposes it.
func (m *Manager) add(ctx context.Context, now, activates time.Time, supersede bool) (fsm.Key, error) {
	k, err := generate(now, activates)
	if err != nil {
		return fsm.Key{}, err
	}
	// Sealed before it is proposed: the raft log, the state file and
	// snapshots only ever hold the sealed form.
	if k.Private, err = m.cfg.KEK.Seal(k.Private, PrivateKeyAAD(k.Kid)); err != nil {
		return fsm.Key{}, fmt.Errorf("keys: seal key: %w", err)
	}
	if err := m.apply(ctx, fsm.TypeAddKey, fsm.AddKey{Key: k, SupersedePending: supersede}); err != nil {
		return fsm.Key{}, fmt.Errorf("keys: add key: %w", err)
	}
	return k, nil
}

func (m *Manager) apply(ctx context.Context, t fsm.Type, v any) error {
	cmd, err := fsm.NewCommand(t, v)
	if err != nil {
		return err
	}
	// The key events come from the apply; the stamp gives them the node
	// and the actor: the admin of an API call, else the node itself.
	cmd = fsm.StampIn(ctx, cmd, m.now(), fsm.Audit{Actor: fsm.ActorSystem})
	res, err := m.cfg.Applier.Apply(ctx, cmd)
	if err != nil {
		return err
	}
	return res.Err
}

// generate makes an RSA key whose kid is its RFC 7638 thumbprint (SHA-256,
// base64url), so a kid names exactly one key material. Private is the bare
// PKCS#8 DER: add seals it.
func generate(now, activates time.Time) (fsm.Key, error) {
	priv, err := rsa.GenerateKey(rand.Reader, RSABits)
	if err != nil {
		return fsm.Key{}, fmt.Errorf("keys: generate: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fsm.Key{}, fmt.Errorf("keys: encode: %w", err)
	}
	pub, err := publicJWK(priv, "")
	if err != nil {
		return fsm.Key{}, err
	}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return fsm.Key{}, fmt.Errorf("keys: thumbprint: %w", err)
	}
	return fsm.Key{
		Kid:         base64.RawURLEncoding.EncodeToString(tp),
		Private:     der,
		CreatedAt:   now,
		ActivatesAt: activates,
	}, nil
}

// Run is the leader-only rotation loop: a Tick at once and every TickEvery
// until ctx ends. The caller starts it when this node becomes leader (after
// its state has caught up with the log) and cancels ctx when leadership is
// lost. Tick errors are logged and retried on the next tick.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(TickEvery)
	defer t.Stop()
	for {
		if err := m.Tick(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("key rotation pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick runs one pass of the rotation policy at Now, reading the stored keys
// directly (not through the cache):
//   - no key signs now: add one that signs at once (first start);
//   - the active key has signed for RotateEvery-PublishLead and no key is
//     next: add a next key that activates at the scheduled time
//     (activation of the active key + RotateEvery), and never sooner than
//     PublishLead from now;
//   - remove keys whose retention ended.
func (m *Manager) Tick(ctx context.Context) error {
	now := m.now().UTC()
	stored, _, err := m.cfg.State.Keys()
	if err != nil {
		return fmt.Errorf("keys: read key set: %w", err)
	}
	es := order(stored)
	var errs []error
	active := activeAt(es, now)
	switch {
	case active < 0:
		k, err := m.add(ctx, now, now, false)
		if err != nil {
			errs = append(errs, err)
			break
		}
		m.log.Info("first signing key added", "kid", k.Kid)
	case active == len(es)-1 && !now.Before(es[active].activatesAt.Add(m.cfg.RotateEvery-m.cfg.PublishLead)):
		activates := es[active].activatesAt.Add(m.cfg.RotateEvery)
		if earliest := now.Add(m.cfg.PublishLead); activates.Before(earliest) {
			activates = earliest
		}
		k, err := m.add(ctx, now, activates, false)
		if err != nil {
			errs = append(errs, err)
			break
		}
		m.log.Info("scheduled signing key added", "kid", k.Kid, "activates_at", k.ActivatesAt)
	}
	for _, e := range es {
		end := e.unpublishedAt(m.cfg.Retention)
		if end.IsZero() || now.Before(end) {
			continue
		}
		err := m.apply(ctx, fsm.TypeRemoveKey, fsm.RemoveKey{Kid: e.kid})
		if err != nil && !errors.Is(err, fsm.ErrNotFound) {
			errs = append(errs, fmt.Errorf("keys: remove key %s: %w", e.kid, err))
			continue
		}
		m.log.Info("retired signing key removed", "kid", e.kid, "retired_at", e.retiredAt)
	}
	return errors.Join(errs...)
}
