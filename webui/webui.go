package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/i18n"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// contentSecurityPolicy allows only our own stylesheet and images: no
// script, no inline style, no framing, no <base>.
//
// form-action is deliberately absent. The forms post to our own origin,
// but a successful POST answers 302/303 to the relying party's
// redirect_uri, and browsers (Chrome at least) apply form-action to the
// redirects that follow a form submission, so form-action 'self' would
// block the very last step of every sign-in. form-action does not fall back
// to default-src, so omitting it leaves form targets unrestricted; the
// templates only ever post to the caller's Action.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'"

// scriptPolicy is the passkey page's: the same, plus our own script file
// (never inline script).
const scriptPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'"

// UI renders the pages. It is safe for concurrent use; create it once
// with New.
type UI struct {
	signIn, secondFactor, picker, consent, errorPage, message localized
	smsCode, passkey, account, totpSetup, recoveryCodes       localized
	address, newPassword, confirm                             localized

	cat *i18n.Catalog // locales/<tag>/*.json

	assets    map[string]asset // by file name under /static/
	styleURL  string
	scriptURL string
	iconURL   string
}

// localized is one page's template in each of the languages, by index in
// languages: the same source, with t and lang bound to that language.
type localized []*template.Template

// asset is one embedded static file.
type asset struct {
	body        []byte
	hash        string // hex prefix of the SHA-256 of body
	contentType string
}

// New parses and checks every template and hashes the static files. It
// fails if any template does not parse or cannot be escaped.
func New() (*UI, error) {
	u := &UI{assets: map[string]asset{}}
	if err := u.loadAssets(); err != nil {
		return nil, err
	}
	style, ok := u.assets["style.css"]
	if !ok {
		return nil, fmt.Errorf("webui: static/style.css missing")
	}
	u.styleURL = "/static/style.css?v=" + style.hash
	script, ok := u.assets["passkey.js"]
	if !ok {
		return nil, fmt.Errorf("webui: static/passkey.js missing")
	}
	u.scriptURL = "/static/passkey.js?v=" + script.hash
	icon, ok := u.assets[FaviconName]
	if !ok {
		return nil, fmt.Errorf("webui: static/%s missing", FaviconName)
	}
	u.iconURL = "/" + FaviconName + "?v=" + icon.hash

	cat, err := i18n.Load(localeFiles, "locales")
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	u.cat = cat

	funcs := template.FuncMap{
		"styleURL":  func() string { return u.styleURL },
		"scriptURL": func() string { return u.scriptURL },
		"iconURL":   func() string { return u.iconURL },
		"jsonData":  jsonData,
		"has":       slices.Contains[[]string, string],
		"pathOnly":  pathOnly,
	}
	for k, f := range u.localeFuncs(0) {
		funcs[k] = f
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/language.html")
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	pages := []struct {
		file string
		dst  *localized
		zero any
	}{
		{"signin.html", &u.signIn, SignInPage{}},
		{"secondfactor.html", &u.secondFactor, SecondFactorPage{}},
		{"picker.html", &u.picker, PickerPage{}},
		{"consent.html", &u.consent, ConsentPage{}},
		{"error.html", &u.errorPage, ErrorPage{}},
		{"message.html", &u.message, MessagePage{}},
		{"smscode.html", &u.smsCode, SMSCodePage{}},
		{"passkey.html", &u.passkey, PasskeyPage{}},
		{"account.html", &u.account, AccountPage{}},
		{"totpsetup.html", &u.totpSetup, TOTPSetupPage{}},
		{"recoverycodes.html", &u.recoveryCodes, RecoveryCodesPage{}},
		{"address.html", &u.address, AddressPage{}},
		{"newpassword.html", &u.newPassword, NewPasswordPage{}},
		{"confirm.html", &u.confirm, ConfirmPage{}},
	}
	for _, p := range pages {
		page, err := base.Clone()
		if err != nil {
			return nil, fmt.Errorf("webui: %s: %w", p.file, err)
		}
		if _, err := page.ParseFS(templateFiles, "templates/"+p.file); err != nil {
			return nil, fmt.Errorf("webui: %w", err)
		}
		for i := range languages {
			t, err := page.Clone()
			if err != nil {
				return nil, fmt.Errorf("webui: %s: %w", p.file, err)
			}
			t.Funcs(u.localeFuncs(i))
			// html/template escapes lazily, on first execution; do it now.
			if err := t.ExecuteTemplate(io.Discard, "layout", p.zero); err != nil {
				return nil, fmt.Errorf("webui: %s: %w", p.file, err)
			}
			*p.dst = append(*p.dst, t)
		}
	}
	return u, nil
}

func (u *UI) loadAssets() error {
	return fs.WalkDir(staticFiles, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFiles.ReadFile(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype := contentType(name)
		u.assets[strings.TrimPrefix(name, "static/")] = asset{
			body:        body,
			hash:        hex.EncodeToString(sum[:8]),
			contentType: ctype,
		}
		return nil
	})
}

// contentType is the Content-Type of the static file name. Go's own
// table lacks .ico, for which mime.TypeByExtension would read the host's
// /etc/mime.types (which differs between machines) or find nothing.
func contentType(name string) string {
	ext := path.Ext(name)
	if ext == ".ico" {
		return "image/x-icon"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// FaviconName is the site's icon among the static files. Static serves it
// at /favicon.ico too, where browsers ask for it unprompted, and every
// page's layout links it there (rel="icon") with its version.
const FaviconName = "favicon.ico"

// StyleURL is the versioned URL of the stylesheet, for example
// /static/style.css?v=0123456789abcdef.
func (u *UI) StyleURL() string { return u.styleURL }

// Static serves the embedded static files; mount it at "/static/"
// (with or without http.StripPrefix), and at "/favicon.ico" for the
// icon (FaviconName). A request whose v parameter equals
// the file's content hash is cacheable for a year as immutable; any other
// request for the file gets Cache-Control: no-cache, so an old or
// missing version parameter never pins the wrong content.
func (u *UI) Static() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/static"), "/")
		a, ok := u.assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'")
		h.Set("ETag", `"`+a.hash+`"`)
		if r.URL.Query().Get("v") == a.hash {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

// headers writes the security headers every page carries.
func (u *UI) headers(w http.ResponseWriter, csp string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

// render executes the page in English (a page not translated yet); see
// renderIn.
func (u *UI) render(w http.ResponseWriter, status int, t localized, data any) {
	u.renderCSP(w, status, t, language.English, data, contentSecurityPolicy)
}

// renderIn executes the page in the language lang (English when it is
// not one of Languages) into a buffer and writes it with status (200 when
// 0). On a template error it writes a plain 500 and nothing of the page.
func (u *UI) renderIn(w http.ResponseWriter, status int, page localized, lang language.Tag, data any) {
	u.renderCSP(w, status, page, lang, data, contentSecurityPolicy)
}

// renderCSP is renderIn with another Content-Security-Policy.
func (u *UI) renderCSP(w http.ResponseWriter, status int, page localized, lang language.Tag, data any, csp string) {
	t := page[i18n.Index(lang)]
	var buf bytes.Buffer
	u.headers(w, csp)
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		// Unreachable with the embedded templates (New executes each once
		// and the tests render every page); there is no logger here by
		// design, so the caller sees a 500.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "Internal Server Error\n")
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// jsonData embeds a JSON document in a <script type="application/json">
// as it is (html/template would quote a string there). Only valid JSON
// passes; encoding/json escapes <, > and &, so it cannot close the script
// element. Anything else becomes null.
func jsonData(s string) template.JS {
	if !json.Valid([]byte(s)) || strings.Contains(s, "<") {
		return "null"
	}
	return template.JS(s) // #nosec G203 -- validated JSON without '<' (see above)
}

// pathOnly drops the query and fragment of a path+query URL. A GET form
// replaces the query of its action, so the picker's search form targets
// the bare path.
func pathOnly(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i]
	}
	return u
}
