package axe_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// focused describes the element that has the focus, and whether its
// focus can be seen (an outline that is drawn, or a box shadow).
const focusedScript = `(() => {
  const e = document.activeElement;
  if (!e || e === document.body) return JSON.stringify({tag: "body"});
  const s = getComputedStyle(e);
  const outline = s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0;
  return JSON.stringify({tag: e.tagName.toLowerCase(), id: e.id, name: e.getAttribute("name") || "", value: e.getAttribute("value") || "",
    outline: outline ? s.outlineWidth + " " + s.outlineStyle + " " + s.outlineColor : "",
    shadow: s.boxShadow !== "none" ? s.boxShadow : ""});
})()`

type focus struct {
	Tag, ID, Name, Value string
	Outline, Shadow      string
}

func (f focus) String() string {
	s := f.Tag
	if f.ID != "" {
		s += "#" + f.ID
	}
	if f.Name != "" {
		s += "[" + f.Name + "=" + f.Value + "]"
	}
	return s
}

// keys drives a tab with key presses only.
type keys struct {
	t     *testing.T
	ctx   context.Context
	stops []string
}

func (k *keys) focused() focus {
	k.t.Helper()
	actx, cancel := context.WithTimeout(k.ctx, chrometest.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(actx, chromedp.Evaluate[string](focusedScript))
	if err != nil {
		k.t.Fatalf("focus: %v", err)
	}
	var f focus
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		k.t.Fatal(err)
	}
	return f
}

// tabTo presses Tab until the focused element satisfies want, checking
// at each stop that the focus is visible.
func (k *keys) tabTo(what string, want func(focus) bool) {
	k.t.Helper()
	for range 30 {
		chrometest.Do(k.t, k.ctx, chromedp.KeyEvent(kb.Tab))
		f := k.focused()
		if f.Tag == "body" {
			continue
		}
		k.stops = append(k.stops, f.String())
		if f.Outline == "" && f.Shadow == "" {
			k.t.Errorf("at %s: focus on %s cannot be seen (no outline, no box shadow)", chrometest.Location(k.t, k.ctx), f)
		}
		if want(f) {
			return
		}
	}
	k.t.Fatalf("at %s: Tab never reached %s; stops %q", chrometest.Location(k.t, k.ctx), what, k.stops)
}

// typeText types into the focused element.
func (k *keys) typeText(s string) {
	k.t.Helper()
	chrometest.Do(k.t, k.ctx, chromedp.KeyEvent(s))
}

// press presses key (Enter, Space) and waits for the page it leads to.
func (k *keys) press(key string) int {
	k.t.Helper()
	actx, cancel := context.WithTimeout(k.ctx, chrometest.ActionTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(actx, chromedp.KeyEvent(key))
	if err != nil || resp == nil {
		k.t.Fatalf("press %q at %s: %v (no navigation)", key, chrometest.Location(k.t, k.ctx), err)
	}
	return int(resp.Status)
}

func byID(id string) func(focus) bool { return func(f focus) bool { return f.ID == id } }

// TestKeyboardSignInWithSecondFactor: with key presses alone (Tab,
// typing, Enter, Space: no click, no value set by script) a person goes
// from the application's authorization request through email and
// password, the authenticator app's code and consent, to the
// application's redirect with a code; the focus is visible at every stop
// (an outline or a box shadow, as the browser computes it). The site is
// branded, so the brand's colour draws the focus ring.
func TestKeyboardSignInWithSecondFactor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and a browser")
	}
	s := newSite(t)
	secret := s.totp(t)
	s.admin(t, "PUT", "/admin/v1/branding", siteBrand(t).body, nil, 200)
	ctx := chrometest.New(t)
	k := &keys{t: t, ctx: ctx}
	fresh(t, ctx, s.c.Issuer(), "de")
	au, _ := s.authorize(s.consentID, "", oauth2.SetAuthURLParam("acr_values", acrMFA))
	chrometest.Do(t, ctx, chromedp.Navigate(au))

	k.tabTo("the email field", byID("email"))
	k.typeText(annEmail)
	k.tabTo("the password field", byID("password"))
	k.typeText(annPassword)
	if st := k.press(kb.Enter); st != 200 {
		t.Fatalf("after the password: %d at %s", st, chrometest.Location(t, ctx))
	}

	k.tabTo("the code field", byID("code"))
	k.typeText(s.code(t, secret))
	if st := k.press(kb.Enter); st != 200 {
		t.Fatalf("after the code: %d at %s", st, chrometest.Location(t, ctx))
	}

	k.tabTo("Allow", func(f focus) bool { return f.Name == "decision" && f.Value == "allow" })
	k.press(" ")
	loc := chrometest.WaitLocation(t, ctx, s.cb)
	if !strings.Contains(loc, "code=") {
		t.Fatalf("ended at %s, want the application's redirect with a code", loc)
	}
	t.Logf("focus stops: %s", strings.Join(k.stops, " → "))
}
