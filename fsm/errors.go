package fsm

import (
	"errors"
	"syscall"
)

// Domain outcomes returned in Result.Err. Compare with errors.Is.
var (
	ErrNotFound    = errors.New("fsm: not found")
	ErrConflict    = errors.New("fsm: conflict")
	ErrAlreadyUsed = errors.New("fsm: already used")
	ErrExpired     = errors.New("fsm: expired")
	ErrSchema      = errors.New("fsm: unsupported schema version")
	// ErrSessionEnded: the SSO or app session a command relies on is no
	// longer live.
	ErrSessionEnded = errors.New("fsm: session ended")
	// ErrAccessChanged: the person's membership, the organization or the
	// client changed since the code was issued.
	ErrAccessChanged = errors.New("fsm: access changed")
	// ErrMismatch: the code was issued to another client.
	ErrMismatch = errors.New("fsm: mismatch")
	// ErrInvalid: a command that decodes but names an empty, oversized or
	// malformed key. Proposers validate first, so this means a bug or a
	// hostile entry; refusing it keeps every replica running, where a panic
	// would crash-loop all of them on the same entry.
	ErrInvalid = errors.New("fsm: invalid command")
	// ErrReplay: a one-time code or an authenticator counter that was
	// already used (a TOTP step at or before the last accepted one, a
	// passkey sign counter that did not grow).
	ErrReplay = errors.New("fsm: replayed")
	// ErrWrongCode: a text-message or recovery code that does not match.
	ErrWrongCode = errors.New("fsm: wrong code")
	// ErrLocked: a throttle key is locked; the attempt was not counted
	// and must not be evaluated.
	ErrLocked = errors.New("fsm: locked")
	// ErrClosed: the state machine closed before it could apply (it was
	// waiting for disk space); the entries are applied at the next start.
	ErrClosed = errors.New("fsm: closed")
	// ErrMaybeApplied: an Applier lost sight of a write after it was
	// sent to the leader (the leader went away, or the deadline passed,
	// after the append): it may have been applied, or may not. The
	// caller answers 503 saying so; a retry must not create a second
	// record (the admin API's Idempotency-Key).
	ErrMaybeApplied = errors.New("fsm: the write may have been applied")
)

// DiskFull reports whether err is a write refused for want of space: the
// disk is full (ENOSPC) or the quota spent (EDQUOT).
func DiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// ConflictError says which unique field collided.
type ConflictError struct{ Field string }

func (e *ConflictError) Error() string { return "fsm: conflict on " + e.Field }

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// NotFoundError says which referenced record is missing.
type NotFoundError struct{ Field string }

func (e *NotFoundError) Error() string { return "fsm: not found: " + e.Field }

// Unwrap makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }
