package oidc

import (
	"errors"
	"slices"
	"time"

	"github.com/oidcd/oidcd/internal/authn"
)

// Stages of a pending authorization request: which form its step answers
// (authn: the sign-in's stages are handled by Steps).
const (
	stageSignIn  = authn.StageSignIn
	stagePicker  = authn.StagePicker
	stageConsent = authn.StageConsent
	stageMFA     = authn.StageMFA
	stageSMSCode = authn.StageSMSCode
)

// The pending request is sealed for this purpose and lives this long after
// GET /authorize arrived: the whole sign-in must fit in it.
const (
	pendingPurpose = "authz"
	pendingTTL     = 10 * time.Minute
)

// pending is an authorization request in progress. It travels sealed
// (internal/seal, so any node can continue it) in the hidden step input of
// every form, and in the oidcd_authz cookie for the picker's GET pages.
// The embedded authn.Pending is the part the sign-in reads and writes
// (stage, organization, session, CSRF binding, step-up, ceremony and
// text-message handles); its fields sit beside "req" in the JSON.
type pending struct {
	Req authzRequest `json:"req"`
	authn.Pending
}

// errStepInvalid: a step or authz cookie that is missing, tampered with,
// sealed for something else or expired.
var errStepInvalid = errors.New("oidc: sign-in step invalid or expired")

// sealPending seals pd until its request's deadline. The error is the
// sealer's (session.ErrNoBrowserKey: answer 503).
func (p *Provider) sealPending(pd *pending) (string, error) {
	box, err := p.sessions.Box()
	if err != nil {
		return "", err
	}
	return box.Seal(pendingPurpose, pd, pd.Req.RequestedAt.Add(pendingTTL))
}

// openPending opens a sealed pending request whose stage is one of
// stages. It returns errStepInvalid, or the sealer's error.
func (p *Provider) openPending(sealed string, now time.Time, stages ...string) (*pending, error) {
	box, err := p.sessions.Box()
	if err != nil {
		return nil, err
	}
	var pd pending
	if sealed == "" || box.Open(pendingPurpose, sealed, now, &pd) != nil || !slices.Contains(stages, pd.Stage) {
		return nil, errStepInvalid
	}
	return &pd, nil
}
