package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// pageFacts is what a person (and assistive technology) gets from a page:
// its heading, its visible fields with their labels, autocomplete tokens
// and error ties, its announced alert, and whether it has any script.
type pageFacts struct {
	H1     string      `json:"h1"`
	Text   string      `json:"text"`
	Fields []fieldFact `json:"fields"`
	Hidden []fieldFact `json:"hidden"`
	Alert  *struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"alert"`
	Scripts   int      `json:"scripts"`
	Forms     []string `json:"forms"`     // method of each form
	Dangling  []string `json:"dangling"`  // aria-describedby ids with no element
	Links     []string `json:"links"`     // link texts
	Submits   []string `json:"submits"`   // submit buttons' texts
	CardWidth float64  `json:"cardWidth"` // the card's width in CSS pixels
}

type fieldFact struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	Autocomplete string `json:"autocomplete"`
	Label        string `json:"label"`
	Invalid      string `json:"invalid"`
	DescribedBy  string `json:"describedby"`
	Required     bool   `json:"required"`
}

const factsScript = `(() => {
  const field = (e) => ({name: e.name, type: e.type, autocomplete: e.getAttribute("autocomplete") || "",
    label: e.labels && e.labels.length ? e.labels[0].textContent.trim() : "",
    invalid: e.getAttribute("aria-invalid") || "", describedby: e.getAttribute("aria-describedby") || "", required: e.required});
  const controls = [...document.querySelectorAll("input, select, textarea")];
  const alert = document.querySelector("[role=alert]");
  const dangling = [];
  for (const e of document.querySelectorAll("[aria-describedby]")) {
    for (const id of e.getAttribute("aria-describedby").split(/\s+/)) {
      if (id && !document.getElementById(id)) dangling.push(id);
    }
  }
  const card = document.querySelector("main.card");
  return JSON.stringify({
    h1: (document.querySelector("h1") || {}).textContent || "",
    text: document.body.innerText,
    fields: controls.filter((e) => e.type !== "hidden").map(field),
    hidden: controls.filter((e) => e.type === "hidden").map(field),
    alert: alert ? {id: alert.id, text: alert.textContent.trim()} : null,
    scripts: document.scripts.length,
    forms: [...document.forms].map((f) => f.getAttribute("method") || ""),
    dangling,
    links: [...document.querySelectorAll("a")].map((a) => a.textContent.trim()),
    submits: [...document.querySelectorAll("button[type=submit], input[type=submit]")].map((b) => b.textContent.trim() || b.value),
    cardWidth: card ? card.getBoundingClientRect().width : 0,
  });
})()`

// selfServiceTab is one browser of the walk through the pages.
type selfServiceTab struct {
	t   *testing.T
	ctx context.Context
}

// newSelfServiceTab starts a browser whose pages run no script at all: every
// page of the people's own way in must work as plain HTML forms.
func newSelfServiceTab(t *testing.T) *selfServiceTab {
	ctx := chrometest.New(t)
	cdpDo(t, ctx, func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
	// A page's own script does not run (the test's queries still do).
	chrometest.Do(t, ctx, chromedp.Navigate(`data:text/html,<title>off</title><script>document.title="on"</script>`))
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	if title, err := chromedp.Run(actx, chromedp.Title()); err != nil || title != "off" {
		t.Fatalf("script still runs: title %q, %v", title, err)
	}
	return &selfServiceTab{t: t, ctx: ctx}
}

// open navigates to u and returns the page's status.
func (b *selfServiceTab) open(u string) int { return chrometest.Open(b.t, b.ctx, u) }

// fill types text into the input named name (emptied first).
func (b *selfServiceTab) fill(name, text string) {
	b.t.Helper()
	css := `input[name="` + name + `"]`
	actx, cancel := context.WithTimeout(b.ctx, chrometest.ActionTimeout)
	defer cancel()
	if _, err := chromedp.Run(actx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector('`+css+`'); e.value = ""; return true })()`)); err != nil {
		b.t.Fatalf("empty %s: %v", name, err)
	}
	chrometest.Do(b.t, b.ctx, chromedp.SendKeys(chromedp.CSS(css), text))
}

// submit clicks the page's one submit button (of the first form that has
// one), and returns the status of the page it leads to.
func (b *selfServiceTab) submit() int {
	b.t.Helper()
	return chrometest.Click(b.t, b.ctx, `main form button[type="submit"]`)
}

// noValidate turns off the browser's own checks of the forms (minlength,
// type=email), as an older browser would, so that the server's are seen.
func (b *selfServiceTab) noValidate() {
	b.t.Helper()
	chrometest.Do(b.t, b.ctx, chromedp.SetAttributeValue(chromedp.CSS(`main form`), "novalidate", ""))
}

// facts reads the page's facts, checks what every page owes its reader,
// and keeps a screenshot of it under name.
func (b *selfServiceTab) facts(name string, wantStatus, gotStatus int) pageFacts {
	b.t.Helper()
	if gotStatus != wantStatus {
		b.t.Errorf("%s: status %d, want %d (at %s)", name, gotStatus, wantStatus, chrometest.Location(b.t, b.ctx))
	}
	actx, cancel := context.WithTimeout(b.ctx, chrometest.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(actx, chromedp.Evaluate[string](factsScript))
	if err != nil {
		b.t.Fatalf("%s: facts: %v", name, err)
	}
	var f pageFacts
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		b.t.Fatalf("%s: facts %s: %v", name, s, err)
	}
	chrometest.CheckForm(b.t, b.ctx)
	if f.H1 == "" {
		b.t.Errorf("%s: no heading", name)
	}
	if f.Scripts != 0 {
		b.t.Errorf("%s: %d script elements, want none", name, f.Scripts)
	}
	for _, m := range f.Forms {
		if m != "post" {
			b.t.Errorf("%s: a form with method %q, want post", name, m)
		}
	}
	if len(f.Dangling) > 0 {
		b.t.Errorf("%s: aria-describedby names missing elements %q", name, f.Dangling)
	}
	if f.CardWidth < 300 || f.CardWidth > 420 {
		b.t.Errorf("%s: card %.0f px wide, want the sign-in card's", name, f.CardWidth)
	}
	for _, jargon := range []string{"token", "Token", "hash", "stage", "fsm", "null", "<nil>", "%!"} {
		if strings.Contains(f.Text, jargon) {
			b.t.Errorf("%s: page says %q: %q", name, jargon, f.Text)
		}
	}
	chrometest.Screenshot(b.t, b.ctx, "selfservice-"+name)
	return f
}

// field returns the visible field named name, failing the test without it.
func (f pageFacts) field(t *testing.T, page, name string) fieldFact {
	t.Helper()
	for _, x := range f.Fields {
		if x.Name == name {
			return x
		}
	}
	t.Fatalf("%s: no field %q among %+v", page, name, f.Fields)
	return fieldFact{}
}

// wantField checks a field's label and autocomplete token, and that it is
// tied to the page's alert exactly when there is one.
func (f pageFacts) wantField(t *testing.T, page, name, label, autocomplete string) {
	t.Helper()
	x := f.field(t, page, name)
	if x.Label != label || x.Autocomplete != autocomplete {
		t.Errorf("%s: field %s labelled %q autocomplete %q, want %q %q", page, name, x.Label, x.Autocomplete, label, autocomplete)
	}
	if f.Alert != nil {
		if tied := slices.Contains(strings.Fields(x.DescribedBy), f.Alert.ID) && x.Invalid == "true"; !tied {
			t.Errorf("%s: field %s not tied to the error %q (aria-describedby %q, aria-invalid %q)", page, name, f.Alert.Text, x.DescribedBy, x.Invalid)
		}
	} else if x.Invalid != "" || strings.Contains(x.DescribedBy, "error") {
		t.Errorf("%s: field %s marked invalid without an error", page, name)
	}
}

// wantAlert checks the page's announced error (role=alert, with an id a
// field can name).
func (f pageFacts) wantAlert(t *testing.T, page, want string) {
	t.Helper()
	if f.Alert == nil || f.Alert.ID == "" || !strings.Contains(f.Alert.Text, want) {
		t.Errorf("%s: alert %+v, want one with an id saying %q", page, f.Alert, want)
	}
}

// wantNoAlert checks that the page shows no error.
func (f pageFacts) wantNoAlert(t *testing.T, page string) {
	t.Helper()
	if f.Alert != nil {
		t.Errorf("%s: unexpected alert %q", page, f.Alert.Text)
	}
}

// wantText checks that the page says each of want.
func (f pageFacts) wantText(t *testing.T, page string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(f.Text, w) {
			t.Errorf("%s: page does not say %q: %q", page, w, f.Text)
		}
	}
}

// outboxLink waits for a message of kind to addr in the outbox file that
// is not one of seen, and returns its link.
func outboxLink(t *testing.T, path, addr, kind string, seen map[string]bool) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, l := range outboxLines(t, path)[addr] {
			if l.Kind == kind && !seen[l.Text] {
				seen[l.Text] = true
				return l.Link
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s message to %s in the outbox", kind, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSelfServicePagesInBrowser walks every page of the people's own way
// in, in headless Chromium with script turned off, against a real node
// whose mail goes to an outbox file: the sign-in page's links, a
// forgotten password and its reset, a used link, a new address on
// /account and its proof, a registration that goes on to the
// application, and invitations for a new and an existing person. Each
// page is checked for labelled fields with the right autocomplete
// tokens, errors tied to their fields and announced, no script, the
// sign-in card, and no words of the machinery; each is kept as a
// screenshot ($OIDCD_SCREENSHOTS).
func TestSelfServicePagesInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and browsers")
	}
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) {
		cfg.EmailOutbox = outbox
		cfg.RateLimit = "off"
	}})
	tok := testcluster.AdminToken
	var o map[string]any
	do(t, c, "POST", "/admin/v1/organizations", tok, map[string]any{"slug": "alpha", "name": "Alpha"}, &o)
	orgA := o["id"].(string)
	do(t, c, "POST", "/admin/v1/organizations", tok, map[string]any{"slug": "beta", "name": "Beta"}, &o)
	orgB := o["id"].(string)
	if r := do(t, c, "PATCH", "/admin/v1/organizations/"+orgA, tok, map[string]any{"registration": map[string]any{"enabled": true, "email_domains": []string{"example.com"}}}, nil); r.StatusCode != 200 {
		t.Fatalf("registration: %d", r.StatusCode)
	}
	const annOld, annNew, firstPW, secondPW = "ann@example.com", "ann.b@example.com", "correct horse battery", "a brand new passphrase"
	var u map[string]any
	do(t, c, "POST", "/admin/v1/users", tok, map[string]any{"email": annOld, "email_verified": true, "password": firstPW}, &u)
	if r := do(t, c, "POST", "/admin/v1/memberships", tok, map[string]any{"user_id": u["id"], "org_id": orgA}, nil); r.StatusCode != 201 {
		t.Fatalf("membership: %d", r.StatusCode)
	}
	cb := callbackServer(t)
	var cl map[string]any
	do(t, c, "POST", "/admin/v1/clients", tok, map[string]any{"name": "Team Notes", "type": "public", "redirect_uris": []string{cb},
		"scopes": []string{"openid", "email"}, "organization_id": orgA, "skip_consent": true}, &cl)
	app := oauth2.Config{ClientID: cl["client_id"].(string), RedirectURL: cb, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: c.Issuer() + "/authorize"}}
	authorize := func() string {
		return app.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	}
	seen := map[string]bool{}

	// The first sign-in page of an application whose organization lets
	// people register.
	a := newSelfServiceTab(t)
	f := a.facts("01-signin", 200, a.open(authorize()))
	f.wantField(t, "signin", "email", "Email address", "username")
	f.wantField(t, "signin", "password", "Password", "current-password")
	if !slices.Contains(f.Links, "Forgot your password?") || !slices.Contains(f.Links, "Create an account") {
		t.Errorf("signin: links %q, want the forgotten password and registration", f.Links)
	}

	// A forgotten password: the page, then the same answer for a known
	// and an unknown address.
	f = a.facts("02-forgot", 200, chrometest.Click(t, a.ctx, `a[href^="/password/forgot"]`))
	f.wantField(t, "forgot", "email", "Email address", "email")
	f.wantNoAlert(t, "forgot")
	if !slices.Contains(f.Links, "Back to sign in") {
		t.Errorf("forgot: links %q, want the way back to the sign-in", f.Links)
	}
	forgotURL := chrometest.Location(t, a.ctx)
	a.fill("email", "not an address")
	a.noValidate()
	f = a.facts("03-forgot-bad-address", 400, a.submit())
	f.wantAlert(t, "forgot-bad-address", "Enter an email address")
	f.wantField(t, "forgot-bad-address", "email", "Email address", "email")
	a.fill("email", annOld)
	known := a.facts("04-forgot-sent", 200, a.submit())
	known.wantText(t, "forgot-sent", "If an account exists for that address")
	a.open(forgotURL)
	a.fill("email", "nobody@example.com")
	unknown := a.facts("04-forgot-sent-unknown", 200, a.submit())
	if known.Text != unknown.Text {
		t.Errorf("forgot: a known address answers %q, an unknown one %q", known.Text, unknown.Text)
	}

	// The reset link: the new-password form, a password the policy
	// refuses, the new one set, then the link used up.
	reset := outboxLink(t, outbox, annOld, "password_reset", seen)
	f = a.facts("05-reset", 200, a.open(reset))
	f.wantField(t, "reset", "new_password", "New password", "new-password")
	if len(f.Hidden) == 0 || !slices.ContainsFunc(f.Hidden, func(h fieldFact) bool { return h.Name == "username" && h.Autocomplete == "username" }) {
		t.Errorf("reset: no hidden username for password managers: %+v", f.Hidden)
	}
	a.fill("new_password", "short")
	a.noValidate()
	f = a.facts("06-reset-refused", 400, a.submit())
	f.wantAlert(t, "reset-refused", "8 to 1024 characters")
	f.wantField(t, "reset-refused", "new_password", "New password", "new-password")
	a.fill("new_password", secondPW)
	f = a.facts("07-reset-done", 200, a.submit())
	f.wantText(t, "reset-done", "Sign in with your new password")
	f = a.facts("08-link-invalid", 410, a.open(reset))
	f.wantText(t, "link-invalid", "already used", "ask for a new one")
	if resp, err := c.Client().Get(reset); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("a link's page: Referrer-Policy %q, want no-referrer", resp.Header.Get("Referrer-Policy"))
	}

	// /account: signed in with the new password, the address section, a
	// refused new address, then one pending until its link is followed.
	f = a.facts("09-account-signin", 200, a.open(c.Issuer()+"/account"))
	f.wantField(t, "account-signin", "email", "Email address", "username")
	a.fill("email", annOld)
	a.fill("password", secondPW)
	f = a.facts("10-account", 200, chrometest.Click(t, a.ctx, `button[name="method"][value="password"]`))
	f.wantField(t, "account", "new_email", "New email address", "email")
	f.wantText(t, "account", "Email address", annOld+" (confirmed)")
	a.fill("new_email", annOld)
	f = a.facts("11-account-email-same", 400, chrometest.Click(t, a.ctx, `button[value="email-change"]`))
	f.wantAlert(t, "account-email-same", "That is your address already")
	f.wantField(t, "account-email-same", "new_email", "New email address", "email")
	a.fill("new_email", annNew)
	if f.Alert != nil && f.Alert.ID != "new-email-error" {
		t.Errorf("account-email-same: the error is not in the address's section: %+v", f.Alert)
	}
	if loc := chrometest.Location(t, a.ctx); !strings.HasSuffix(loc, "#email-address") {
		t.Errorf("account-email-same: at %s, want the address's section", loc)
	}
	f = a.facts("12-account-email-pending", 200, chrometest.Click(t, a.ctx, `button[value="email-change"]`))
	f.wantText(t, "account-email-pending", "Pending: we sent a link to "+annNew, "until then it stays "+annOld)
	f.wantNoAlert(t, "account-email-pending")

	verify := outboxLink(t, outbox, annNew, "verify_email", seen)
	f = a.facts("13-verify-email", 200, a.open(verify))
	f.wantText(t, "verify-email", "Confirm that "+annNew+" becomes the address")
	// One button that confirms, and the language picker's.
	if !slices.Equal(f.Submits, []string{"Confirm", "Change language"}) {
		t.Errorf("verify-email: buttons %q, want Confirm and the language picker's", f.Submits)
	}
	f = a.facts("14-verify-email-done", 200, a.submit())
	f.wantText(t, "verify-email-done", "is now "+annNew)
	outboxLink(t, outbox, annOld, "email_changed", seen)

	// Registration from the application's sign-in page: a refused domain,
	// the answer, the link's password page, then on to the application.
	b := newSelfServiceTab(t)
	b.open(authorize())
	f = b.facts("15-register", 200, chrometest.Click(t, b.ctx, `a[href^="/register"]`))
	f.wantField(t, "register", "email", "Email address", "email")
	f.wantText(t, "register", "join Alpha")
	b.fill("email", "sam@elsewhere.test")
	f = b.facts("16-register-domain", 400, b.submit())
	f.wantAlert(t, "register-domain", "Use your address at example.com")
	f.wantField(t, "register-domain", "email", "Email address", "email")
	b.fill("email", "sam@example.com")
	f = b.facts("17-register-sent", 200, b.submit())
	f.wantText(t, "register-sent", "sam@example.com", "24 hours")
	// An address that has an account gets the same answer.
	b.open(authorize())
	chrometest.Click(t, b.ctx, `a[href^="/register"]`)
	b.fill("email", annNew)
	if st := b.submit(); st != 200 || !strings.Contains(chrometest.Text(t, b.ctx, "main"), annNew+". Open the link in it within 24 hours") {
		t.Errorf("register an address with an account: %d %q", st, chrometest.Text(t, b.ctx, "main"))
	}
	register := outboxLink(t, outbox, "sam@example.com", "registration", seen)
	f = b.facts("18-register-password", 200, b.open(register))
	f.wantField(t, "register-password", "new_password", "New password", "new-password")
	f.wantText(t, "register-password", "sam@example.com", "Alpha")
	b.fill("new_password", "sam's own passphrase")
	b.submit()
	if loc := chrometest.WaitLocation(t, b.ctx, cb); !strings.Contains(loc, "code=") {
		t.Errorf("after registration: at %s, want the application's callback with a code", loc)
	}

	// An invitation for a new person, then one for a person who has an
	// account (in another organization).
	for _, inv := range []struct{ email, org string }{{"ines@example.com", orgA}, {annNew, orgB}} {
		if r := do(t, c, "POST", "/admin/v1/invitations", tok, map[string]any{"email": inv.email, "organization_id": inv.org}, nil); r.StatusCode != 201 {
			t.Fatalf("invitation of %s: %d", inv.email, r.StatusCode)
		}
	}
	d := newSelfServiceTab(t)
	f = d.facts("19-invite-new", 200, d.open(outboxLink(t, outbox, "ines@example.com", "invitation", seen)))
	f.wantField(t, "invite-new", "new_password", "New password", "new-password")
	f.wantText(t, "invite-new", "invited to join Alpha", "ines@example.com")
	d.fill("new_password", "ines's passphrase")
	f = d.facts("20-invite-created", 200, d.submit())
	f.wantText(t, "invite-created", "member of Alpha")

	f = d.facts("21-invite-signin", 200, d.open(outboxLink(t, outbox, annNew, "invitation", seen)))
	f.wantField(t, "invite-signin", "email", "Email address", "username")
	f.wantField(t, "invite-signin", "password", "Password", "current-password")
	f.wantText(t, "invite-signin", "This invitation is for "+annNew)
	f.wantNoAlert(t, "invite-signin")
	d.fill("password", "not the password")
	f = d.facts("22-invite-signin-wrong", 400, chrometest.Click(t, d.ctx, `button[name="method"][value="password"]`))
	f.wantAlert(t, "invite-signin-wrong", "")
	f.wantField(t, "invite-signin-wrong", "password", "Password", "current-password")
	f.wantText(t, "invite-signin-wrong", "This invitation is for "+annNew)
	d.fill("password", secondPW)
	f = d.facts("23-invite-accept", 200, chrometest.Click(t, d.ctx, `button[name="method"][value="password"]`))
	f.wantText(t, "invite-accept", "invited to join Beta as "+annNew)
	f = d.facts("24-invite-joined", 200, d.submit())
	f.wantText(t, "invite-joined", "You joined Beta")

	type membership struct {
		OrgID  string `json:"org_id"`
		Status string `json:"status"`
	}
	var ms struct {
		Data []membership `json:"data"`
	}
	if r := do(t, c, "GET", "/admin/v1/memberships?user_id="+u["id"].(string), tok, nil, &ms); r.StatusCode != http.StatusOK {
		t.Fatalf("memberships: %d", r.StatusCode)
	}
	if !slices.Contains(ms.Data, membership{orgB, "active"}) {
		t.Errorf("memberships after the invitation: %+v", ms.Data)
	}
}
