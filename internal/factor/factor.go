package factor

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/oidcd/oidcd/internal/password"
)

// Authenticator-app parameters (SHA1, 6 digits, 30 s).
const (
	TOTPPeriod = 30
	totpSkew   = 1 // one step either side, for clock drift
)

var totpOpts = totp.ValidateOpts{Period: TOTPPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// NewTOTPSecret generates a secret for account (the label an app shows
// under issuer) and returns it in base32 with its otpauth:// URI.
func NewTOTPSecret(issuer, account string) (secret, uri string, err error) {
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer: issuer, AccountName: account, Period: TOTPPeriod,
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, SecretSize: 20,
	})
	if err != nil {
		return "", "", err
	}
	return key.Secret(), key.URL(), nil
}

// TOTPAAD is the additional data a TOTP secret is sealed with.
func TOTPAAD(userID string) string { return "totp/" + userID }

// TOTPStep finds the time step at now whose code is code, within one step
// of skew; ok is false when none matches. Every candidate is compared in
// constant time. The caller spends the step (fsm.UseTOTP) so a code works
// once.
func TOTPStep(secret, code string, now time.Time) (step int64, ok bool) {
	code = NormalizeCode(code)
	if len(code) != 6 {
		return 0, false
	}
	hit := 0
	base := now.Unix() / TOTPPeriod
	for d := int64(-totpSkew); d <= totpSkew; d++ {
		s := base + d
		want, err := totp.GenerateCodeCustom(secret, time.Unix(s*TOTPPeriod, 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			step, hit = s, 1
		}
	}
	return step, hit == 1
}

// TOTPCode is the code of secret at t (tests and tools). The secret may
// be written in groups, as the setup page shows it: spaces are ignored,
// as authenticator apps ignore them.
func TOTPCode(secret string, t time.Time) (string, error) {
	return totp.GenerateCodeCustom(strings.ReplaceAll(secret, " ", ""), t, totpOpts)
}

// RecoveryCodeCount is how many recovery codes a set has.
const RecoveryCodeCount = 10

// NewRecoveryCodes returns fresh codes (xxxxx-xxxxx, 50 random bits each)
// and their hashes as stored.
func NewRecoveryCodes() (codes, hashes []string) {
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	for range RecoveryCodeCount {
		var b [7]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		s := strings.ToLower(enc.EncodeToString(b[:]))[:10]
		codes = append(codes, s[:5]+"-"+s[5:])
		hashes = append(hashes, RecoveryHash(s))
	}
	return codes, hashes
}

// RecoveryHash is how a recovery code is stored: the SHA-256 of its
// normalized form. The codes carry 50 random bits, so a fast hash suffices
// (the throttle bounds guessing far below that).
func RecoveryHash(code string) string { return password.HashSecret("rcv:" + NormalizeCode(code)) }

// NormalizeCode drops spaces and dashes and lowers the case, so a code can
// be typed as shown or as one run of characters.
func NormalizeCode(code string) string {
	return strings.ToLower(strings.NewReplacer(" ", "", "-", "", "\t", "").Replace(code))
}

// Throttle key prefixes (fsm.Throttle keys are prefix + subject).
const (
	KeyPassword = "pwd:"   // + EmailSubject(email)
	KeyCode     = "code:"  // + user id, or "tel" + phone for text-message codes
	KeyIP       = "ip:"    // + IP address
	KeySMSTo    = "smsto:" // + phone number
	KeySMSIP    = "smsip:" // + IP address
)

// EmailSubject is the throttle subject of an email address: a hash, so
// keys hold no personal data, and the same for unknown addresses.
func EmailSubject(email string) string { return password.HashSecret(strings.ToLower(email))[:22] }
