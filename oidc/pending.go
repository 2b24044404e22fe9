package oidc

import (
	"errors"
	"slices"
	"time"
)

// Stages of a pending authorization request: which form its step answers.
const (
	stageSignIn  = "signin"
	stagePicker  = "picker"
	stageConsent = "consent"
	stageMFA     = "mfa"     // the second-factor page (and its passkey ceremony)
	stageSMSCode = "smscode" // the text-message code page
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
type pending struct {
	Req   authzRequest `json:"req"`
	Stage string       `json:"stage"`
	// OrgID is the organization chosen on the picker or shown on the
	// consent page; later steps keep to it.
	OrgID string `json:"org,omitempty"`
	// SSOID is the SSO session that satisfied this request's
	// authentication rules (prompt, max_age). Later steps accept only that
	// session, so a fresh sign-in is not asked for twice.
	SSOID string `json:"sso,omitempty"`
	// CSRF is the double-submit token this step is bound to.
	CSRF string `json:"csrf,omitempty"`
	// StepUp: a second factor was completed for SSOID in this flow, so the
	// strength check passes even when the factor (a recovery code) did not
	// raise the acr; the relying party judges the acr it gets.
	StepUp bool `json:"stepup,omitempty"`
	// Challenge is the replicated WebAuthn challenge of a passkey
	// ceremony in progress.
	Challenge string `json:"chal,omitempty"`
	// SMS is the handle of the text-message code sent, Phone its number.
	SMS   string `json:"sms,omitempty"`
	Phone string `json:"phone,omitempty"`
}

// errStepInvalid: a step or authz cookie that is missing, tampered with,
// sealed for something else or expired.
var errStepInvalid = errors.New("oidc: sign-in step invalid or expired")

// sealPending seals pd until its request's deadline. The error is the
// sealer's (ErrNoBrowserKey: answer 503).
func (p *Provider) sealPending(pd *pending) (string, error) {
	box, err := p.sealer()
	if err != nil {
		return "", err
	}
	return box.Seal(pendingPurpose, pd, pd.Req.RequestedAt.Add(pendingTTL))
}

// openPending opens a sealed pending request whose stage is one of
// stages. It returns errStepInvalid, or the sealer's error.
func (p *Provider) openPending(sealed string, now time.Time, stages ...string) (*pending, error) {
	box, err := p.sealer()
	if err != nil {
		return nil, err
	}
	var pd pending
	if sealed == "" || box.Open(pendingPurpose, sealed, now, &pd) != nil || !slices.Contains(stages, pd.Stage) {
		return nil, errStepInvalid
	}
	return &pd, nil
}
