package oidc

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// TestRefusalIsRecorded: a password sign-in through the built-in client
// (which needs a second factor) by a person who has none is refused
// (access_denied), and the refusal is the person's failed sign-in event,
// reason no_second_factor; their /account lists it as refused, not as
// the password step before it.
func TestRefusalIsRecorded(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.signIn(b.get(authzPath(adminQuery(tAdminLoopback))), hEmail, hPassword)
	loc, err := url.Parse(p.location())
	if p.status != http.StatusSeeOther || err != nil || loc.Query().Get("error") != errNoSecondFactor.Code {
		t.Fatalf("sign-in without a second factor: %d %q", p.status, p.location())
	}
	evs, err := h.applier.State().AuditEvents(fsm.AuditQuery{Type: fsm.EventSignin, Subject: hUser, Newest: true, Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events: %v %v", evs, err)
	}
	if e := evs[0]; e.Outcome != fsm.OutcomeFailure || e.Detail["reason"] != authn.ReasonNoSecondFactor || e.ClientID != AdminClientID {
		t.Errorf("newest sign-in event %+v: want the refusal, reason %s", e, authn.ReasonNoSecondFactor)
	}

	acc := b.get("/account")
	refused := h.p.cfg.UI.Text(language.English, "account.activity.refused_with", h.p.cfg.UI.Text(language.English, "account.reason.no_second_factor"))
	signedIn := h.p.cfg.UI.Text(language.English, "account.activity.ok_with", h.p.cfg.UI.Text(language.English, "account.strength.pwd"))
	if acc.status != http.StatusOK || !strings.Contains(acc.body, `<td role="cell">`+refused+"</td>") || strings.Contains(acc.body, signedIn) {
		t.Errorf("/account's activity: want %q and no %q:\n%s", refused, signedIn, acc.body)
	}
}
