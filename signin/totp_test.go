package signin

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/webui"
)

// enrollTOTP gives userID an authenticator app and returns its secret.
func (h *harness) enrollTOTP(userID string) string {
	h.t.Helper()
	secret, _, err := factor.NewTOTPSecret("idp.example", hEmail)
	if err != nil {
		h.t.Fatal(err)
	}
	sealed, err := (*kek.KEK)(nil).Seal([]byte(secret), factor.TOTPAAD(userID))
	if err != nil {
		h.t.Fatal(err)
	}
	h.apply(fsm.TypeSetTOTP, fsm.SetTOTP{UserID: userID, Secret: sealed, At: h.clock.Now()})
	return secret
}

// enrollRecovery gives userID fresh recovery codes and returns them.
func (h *harness) enrollRecovery(userID string) []string {
	h.t.Helper()
	codes, hashes := factor.NewRecoveryCodes()
	h.apply(fsm.TypeSetRecoveryCodes, fsm.SetRecoveryCodes{UserID: userID, Hashes: hashes, At: h.clock.Now()})
	return codes
}

// secondFactorPage signs in by password for a request that asks for mfa
// and returns the second-factor page it leads to.
func (b *browser) secondFactorPage() page {
	b.t.Helper()
	p := b.signIn(b.get(authzPath(authzQuery(hPublic, true))), hEmail, hPassword)
	if p.status != http.StatusOK {
		b.t.Fatalf("after the password: %d\n%s", p.status, p.body)
	}
	return p
}

// TestTOTPSecondFactor: a request that asks for mfa gets the second-factor
// page after the password; a wrong code re-shows it with 400, the right
// one steps the session up to mfa (amr pwd otp), and the same code is
// refused in another browser (its time step is spent).
func TestTOTPSecondFactor(t *testing.T) {
	h := newHarness(t)
	secret := h.enrollTOTP(hUser)
	b := h.browser()
	p := b.secondFactorPage()
	form := postForm(t, p, "method")
	if !slices.Contains(form.buttons, [2]string{"method", webui.MethodOTP}) || slices.Contains(form.buttons, [2]string{"method", webui.MethodRecovery}) {
		t.Fatalf("methods offered: %v", form.buttons)
	}
	p = b.submit(form, "method", webui.MethodOTP, map[string]string{"code": "000000"})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, testText(t, language.English, msgBadCode)) {
		t.Fatalf("wrong code: %d\n%s", p.status, p.body)
	}
	code, err := factor.TOTPCode(secret, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := done(t, b.submit(postForm(t, p, "method"), "method", webui.MethodOTP, map[string]string{"code": code}))
	if got.ACR != authn.ACRMFA || !slices.Equal(got.AMR, []string{authn.AMRPassword, authn.AMROTP}) || !got.StepUp {
		t.Fatalf("after the code: %+v", got)
	}

	// The code's time step is spent: another browser cannot reuse it.
	other := h.browser()
	p = other.submit(postForm(t, other.secondFactorPage(), "method"), "method", webui.MethodOTP, map[string]string{"code": code})
	if p.status != http.StatusBadRequest {
		t.Fatalf("replayed code: %d, want 400", p.status)
	}
}

// TestRecoveryCodeSecondFactor: a recovery code completes the second step
// once (amr rcv, StepUp set) without raising the acr, and cannot be used
// twice.
func TestRecoveryCodeSecondFactor(t *testing.T) {
	h := newHarness(t)
	codes := h.enrollRecovery(hUser)
	b := h.browser()
	p := b.submit(postForm(t, b.secondFactorPage(), "method"), "method", webui.MethodRecovery, map[string]string{"code": strings.ToUpper(codes[0])})
	// The stand-in flow, like oidc, refuses a strength a recovery code did
	// not give: the step itself succeeded.
	if p.status != http.StatusForbidden {
		t.Fatalf("recovery code: %d\n%s", p.status, p.body)
	}
	sessions, _, err := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
	if err != nil || len(sessions) != 1 || !slices.Contains(sessions[0].AMR, authn.AMRRecovery) || sessions[0].ACR != authn.ACRPwd {
		t.Fatalf("session after the recovery code: %+v %v", sessions, err)
	}
	f, err := h.applier.State().Factors(hUser)
	if err != nil || f.RecoveryLeft() != len(codes)-1 {
		t.Fatalf("recovery codes left: %d %v", f.RecoveryLeft(), err)
	}
	other := h.browser()
	p = other.submit(postForm(t, other.secondFactorPage(), "method"), "method", webui.MethodRecovery, map[string]string{"code": codes[0]})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, testText(t, language.English, msgBadCode)) {
		t.Fatalf("spent code: %d\n%s", p.status, p.body)
	}
}

// TestSecondFactorLockout: five wrong codes lock the person's code key;
// the sixth attempt answers 429 with Retry-After before any check.
func TestSecondFactorLockout(t *testing.T) {
	h := newHarness(t)
	h.enrollTOTP(hUser)
	b := h.browser()
	p := b.secondFactorPage()
	for i := range 5 {
		p = b.submit(postForm(t, p, "method"), "method", webui.MethodOTP, map[string]string{"code": "000000"})
		if p.status != http.StatusBadRequest {
			t.Fatalf("wrong code %d: %d", i+1, p.status)
		}
	}
	p = b.submit(postForm(t, p, "method"), "method", webui.MethodOTP, map[string]string{"code": "000000"})
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
		t.Fatalf("sixth code: %d (Retry-After %q)\n%s", p.status, p.header.Get("Retry-After"), p.body)
	}
	if th, err := h.applier.State().Throttle(throttleCode.rule(hUser).Key); err != nil || !th.Locked(h.clock.Now()) {
		t.Fatalf("code key not locked: %+v %v", th, err)
	}
}
