package chrometest

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
)

// formScript lists the visible form controls of the page that lack a
// <label> (by for= or by wrapping, as HTMLInputElement.labels reports), and
// the text-like inputs that lack an autocomplete attribute.
const formScript = `(() => {
  const textLike = new Set(["text", "email", "tel", "password", "number", "search", "url"]);
  const noLabel = new Set(["hidden", "submit", "button", "reset", "image"]);
  const visible = (el) => {
    if (el.getClientRects().length === 0) return false;
    const s = getComputedStyle(el);
    return s.visibility !== "hidden" && s.display !== "none";
  };
  const describe = (el) => {
    let d = el.tagName.toLowerCase();
    if (el.tagName === "INPUT") d += ' type="' + el.type + '"';
    if (el.name) d += ' name="' + el.name + '"';
    if (el.id) d += ' id="' + el.id + '"';
    return d;
  };
  const problems = [];
  for (const el of document.querySelectorAll("input, select, textarea")) {
    const type = el.tagName === "INPUT" ? el.type : "";
    if (type === "hidden" || !visible(el)) continue;
    if (!noLabel.has(type) && (!el.labels || el.labels.length === 0)) {
      problems.push(describe(el) + ": no <label>");
    }
    if (el.tagName === "INPUT" && textLike.has(type) && (el.getAttribute("autocomplete") || "").trim() === "") {
      problems.push(describe(el) + ": no autocomplete");
    }
  }
  return problems;
})()`

// FormProblems returns one line per visible input, select or textarea of the
// tab's current page that has no <label>, and per text-like input (text,
// email, tel, password, number, search, url) without autocomplete. Buttons
// (submit, button, reset, image) need no label: their value names them.
func FormProblems(ctx context.Context) ([]string, error) {
	actx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	return chromedp.Run(actx, chromedp.Evaluate[[]string](formScript))
}

// CheckForm fails the test, naming each control, when FormProblems finds
// any on the tab's current page.
func CheckForm(t testing.TB, ctx context.Context) {
	t.Helper()
	problems, err := FormProblems(ctx)
	if err != nil {
		t.Fatalf("chrometest: check form at %s: %v", location(ctx), err)
	}
	if len(problems) > 0 {
		t.Errorf("chrometest: form at %s:", location(ctx))
		for _, p := range problems {
			t.Errorf("  %s", p)
		}
	}
}
