// Package webui renders the server-side HTML pages of the provider: the
// sign-in steps under /authorize (sign-in, second factor, organization
// picker, consent), the pages of an emailed link and of /account, the
// error page shown instead of a redirect to the client, and plain message
// pages such as "You are signed out". It also serves the one stylesheet
// they use.
//
// Each page has one method on *UI that writes the security headers, the
// status and the HTML. Callers pass plain data structs whose strings they
// have already validated; html/template escapes them by context.
//
// Invariants:
//   - webui imports only internal/i18n and holds no package-level state: all
//     templates and static files are embedded, parsed and hashed once by
//     New, and every template is executed once there with zero data so
//     that html/template's escaping errors surface at start-up, not on the
//     first request.
//   - No JavaScript, no inline style: the pages are served with a strict
//     Content-Security-Policy (see headers) and load only /static/ CSS.
//   - A page is rendered into a buffer and written only when complete; a
//     template failure yields a plain-text 500, never half a page.
//   - Every page is Cache-Control: no-store. The stylesheet URL carries a
//     content hash (StyleURL) and only that exact URL is cached as
//     immutable, so nodes of a cluster running different versions never
//     poison a browser cache with each other's CSS.
//   - Forms are plain, so that password managers, assistive technology
//     and tests can drive them: method="post", hidden inputs
//     csrf_token and step echoed unchanged (and, on a form that sets a new
//     password, a hidden username naming the account for password
//     managers), standard autocomplete tokens (username or email for an
//     address, current-password, new-password, tel, one-time-code),
//     a <label for> for every visible input, and choices as submit
//     buttons with a name and value. The first submit button in a form is
//     the one Enter triggers, so the default choice always comes first.
//
// # Languages
//
// Texts come from catalogs, locales/<tag>/*.json (English is the source),
// loaded at start by internal/i18n into an x/text catalog; a language
// lacking a key of English's, or a placeholder, fails New. Each page template is parsed
// once per language with the functions t (a message: {{t "key" args}}),
// tStrong (a message whose %s argument is shown in <strong>) and lang
// (for <html lang>) bound to that language; i18n.Negotiate picks the language
// (ui_locales, then the LangCookie, then Accept-Language, then English)
// and Common.Lang carries it. Callers translate the texts they pass (an
// Error, a Title) with UI.Text in the same language.
//
// Converting a page is mechanical:
//  1. In its template, replace every visible text (text nodes, and the
//     placeholder, aria-label, title, alt and label attributes) by
//     {{t "page.thing"}}; add each key to a
//     file of every language's folder (locales/<tag>/<area>.json).
//  2. Render it with renderIn and the page's Common.Lang (or a Lang
//     field) instead of render.
//  3. In its caller, pass texts as catalog keys translated with
//     UI.Text(lang, key, args...), and set Common.Lang.
//  4. Take the template off notConverted in i18n_test.go: from then on
//     TestTemplatesHoldNoText fails if a text outside the catalog comes
//     back, and TestCatalogKeys if a language lacks one of its keys.
package webui
