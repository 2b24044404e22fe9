package federation

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The kinds of failure, for errors.Is. Every error this package returns
// matches exactly one of them, so the sign-in can choose a page and a
// status without reading messages:
//
//   - ErrUnreachable: the upstream could not be asked or did not answer in
//     time (network, TLS, timeout, HTTP 5xx or 429). Nothing is known to be
//     wrong with the person's attempt; the caller answers 502, or 504 when
//     errors.Is(err, context.DeadlineExceeded), and may offer a retry.
//   - ErrInvalid: the upstream answered, or the browser came back, with
//     something the protocol does not allow (bad JSON, a token that fails a
//     check, a missing or foreign iss parameter, a redirect to another
//     host, an answer too large). The attempt is refused; the caller answers
//     400 with a page (or 200 with a page that starts over).
//   - ErrUpstream: the upstream refused with an OAuth error; the error is an
//     *UpstreamError whose code and description may be shown.
//   - ErrConfig: our side is wrong: the Upstream configuration (an issuer
//     that is not https, no client id) or an argument (an AuthRequest not
//     made by NewAuthRequest). The caller answers 500 and logs it; retrying
//     does not help.
var (
	ErrUnreachable = errors.New("upstream unreachable")
	ErrInvalid     = errors.New("invalid answer from upstream")
	ErrUpstream    = errors.New("upstream refused")
	ErrConfig      = errors.New("invalid upstream configuration")
)

// Limits on what an UpstreamError keeps of what the upstream sent: the
// text ends up on a page and in logs, and the upstream (or whoever stands
// between it and the browser, for an authorization response) chooses it.
const (
	maxErrorCode        = 128
	maxErrorDescription = 512
)

// UpstreamError is an OAuth error the upstream answered with: at the token
// endpoint (Status is its HTTP status) or in the authorization response the
// browser brought back (Status is 0). Code and Description are as given,
// cut to a bounded length and with control characters replaced, so they
// can be logged and shown (escaped) without further care.
type UpstreamError struct {
	Code        string // the OAuth "error", e.g. "access_denied", "invalid_grant"
	Description string // "error_description", "" when absent
	Status      int    // the token endpoint's HTTP status; 0 for an authorization response
}

func (e *UpstreamError) Error() string {
	s := "upstream error " + e.Code
	if e.Description != "" {
		s += ": " + e.Description
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	return s
}

// Is makes errors.Is(err, ErrUpstream) true for an *UpstreamError.
func (e *UpstreamError) Is(target error) bool { return target == ErrUpstream }

// newUpstreamError bounds what the upstream said before it is kept.
func newUpstreamError(code, description string, status int) *UpstreamError {
	return &UpstreamError{
		Code:        cleanText(code, maxErrorCode),
		Description: cleanText(description, maxErrorDescription),
		Status:      status,
	}
}

// cleanText cuts s to at most n bytes (on a rune boundary) and replaces
// invalid UTF-8 and control characters with U+FFFD, so a hostile text can
// neither flood a log nor forge lines in it.
func cleanText(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// kindError is an error of one kind with what happened, and the cause
// when there is one (a network error, a JSON error) so that errors.Is and
// errors.As reach it too.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *kindError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

func invalidf(format string, args ...any) error {
	return &kindError{kind: ErrInvalid, msg: fmt.Sprintf(format, args...)}
}

func configf(format string, args ...any) error {
	return &kindError{kind: ErrConfig, msg: fmt.Sprintf(format, args...)}
}

func unreachablef(format string, args ...any) error {
	return &kindError{kind: ErrUnreachable, msg: fmt.Sprintf(format, args...)}
}

// withKind is cause as an error of kind, with msg saying what was tried.
func withKind(kind error, cause error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...), cause: cause}
}
