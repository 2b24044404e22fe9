package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/i18n"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static/console.css
var styleCSS []byte

// styleHash versions the stylesheet URL, so it can be cached for good.
var styleHash = func() string {
	sum := sha256.Sum256(styleCSS)
	return hex.EncodeToString(sum[:8])
}()

// styleURL is the stylesheet's versioned address.
var styleURL = Prefix + "static/console.css?v=" + styleHash

// contentSecurityPolicy: our stylesheet only; no script, no inline style,
// no framing; forms post only to this origin (every console answer to a
// form stays on it).
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// pages holds one template per page, each the layout with its "main".
// They are parsed once; the tests render every one.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"join": strings.Join,
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"timep": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"path":      url.PathEscape,
		"breakable": breakable,
		"bfields": func(v *view, prefix, logoURL string) brandingFieldsCtx {
			return brandingFieldsCtx{V: v, P: prefix, HasLogo: logoURL != ""}
		},
		"mrow": func(v *view, m membershipRow, ret string) membershipCtx {
			return membershipCtx{V: v, M: m, Return: ret}
		},
		"idpctx": func(v *view, orgs []admin.Org, adminFields, create bool) idpFieldsCtx {
			return idpFieldsCtx{V: v, Orgs: orgs, AdminFields: adminFields, Create: create}
		},
	}
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"signin", "cluster", "orgs", "people", "person", "memberships",
		"clients", "client_created", "keys", "directories", "audit", "confirm", "shown_once", "message",
		"signed_in", "admins", "apikeys", "apikey_created", "invitations", "org", "branding", "idps", "idp"} {
		t := template.Must(base.Clone())
		template.Must(t.ParseFS(templateFiles, "templates/"+name+".html"))
		out[name] = t
	}
	return out
}()

// view is the data of every page.
type view struct {
	Title    string
	Nav      string // the active section of the navigation
	CSRF     string
	SignedIn bool
	Flash    string // a done message, from the done query parameter
	Error    string // a problem with the last submission
	Problems []httpx.Detail
	Form     url.Values // the last submission, to re-fill forms
	Data     any
	// Who is signed in, for the header: a person's email (or id) and
	// role as they were at sign-in, or the admin token.
	Who, Role string
}

// who fills Who and Role from the request's session (nil: none).
func (v *view) who(rs *reqSession) {
	switch {
	case rs == nil:
	case rs.s.person():
		v.Who, v.Role = rs.s.Name, rs.s.Role
	default:
		v.Who, v.Role = "the admin token", "admin"
	}
}

// Offers reports whether the navigation shows the page of route ("GET
// /branding"): not to a role the API refuses it whatever it names (an
// org_admin is not shown the site's branding, the keys or the cluster).
// The page itself still answers with the API's refusal.
func (v *view) Offers(route string) bool {
	return v.Role == "" || admin.MayTry(v.Role, route)
}

// MailLocale is one choice of a message's language.
type MailLocale struct {
	Tag, Name string
	Selected  bool
}

// MailLocales are the languages an administrator's message can be sent
// in (i18n.Languages), the re-filled one selected, else English.
func (v *view) MailLocales() []MailLocale {
	picked := v.Val("locale")
	var out []MailLocale
	for i, t := range i18n.Languages() {
		out = append(out, MailLocale{Tag: t.String(), Name: i18n.Autonym(t), Selected: t.String() == picked || (picked == "" && i == 0)})
	}
	return out
}

// StyleURL is the stylesheet's address.
func (v *view) StyleURL() string { return styleURL }

// TokenError reports whether the page's error is the token form's (the
// sign-in page shows the token field in error).
func (v *view) TokenError() bool {
	_, person := v.Data.(personError)
	return v.Error != "" && !person
}

// Val returns the re-filled value of a form field.
func (v *view) Val(name string) string { return v.Form.Get(name) }

// Checked reports whether a re-filled checkbox was on.
func (v *view) Checked(name string) bool { return v.Form.Get(name) != "" }

// Has reports whether a re-filled multi-value field holds value.
func (v *view) Has(name, value string) bool {
	for _, s := range v.Form[name] {
		if s == value {
			return true
		}
	}
	return false
}

// FieldError is the first problem the API reported for field (or for an
// element of it, such as redirect_uris[1]).
func (v *view) FieldError(field string) string {
	for _, d := range v.Problems {
		if d.Field == field || strings.HasPrefix(d.Field, field+"[") || strings.HasPrefix(d.Field, field+".") {
			return d.Message
		}
	}
	return ""
}

// idpFieldsCtx is the data of the idpfields template: the page, the
// organizations to offer, whether to offer what only an admin sets, and
// whether the form creates.
type idpFieldsCtx struct {
	V           *view
	Orgs        []admin.Org
	AdminFields bool
	Create      bool
}

// membershipCtx is the data of the membership-actions template.
type membershipCtx struct {
	V      *view
	M      membershipRow
	Return string
}

// headers writes the security headers every console answer carries.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

// render writes page with status (200 when 0).
func (c *Console) render(w http.ResponseWriter, status int, page string, v *view) {
	var buf bytes.Buffer
	headers(w)
	if err := pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.log.Error("console: render", "page", page, "err", err)
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

// serveStyle serves the stylesheet.
func serveStyle(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	if r.URL.Query().Get("v") == styleHash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("Content-Length", strconv.Itoa(len(styleCSS)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(styleCSS)
}

// pager is the previous/next navigation of a list page.
type pager struct {
	Page, TotalPages, TotalItems int
	PrevURL, NextURL             string
}

func newPager(base string, page, totalPages, totalItems int, hasPrev, hasNext bool) pager {
	p := pager{Page: page, TotalPages: totalPages, TotalItems: totalItems}
	if hasPrev {
		p.PrevURL = fmt.Sprintf("%s?page=%d", base, page-1)
	}
	if hasNext {
		p.NextURL = fmt.Sprintf("%s?page=%d", base, page+1)
	}
	return p
}

// doneMessages are the notices a redirect after a successful change shows
// (?done=<key>); only these constant texts are ever shown.
var doneMessages = map[string]string{
	"org-created":        "Organization created.",
	"branding-updated":   "Branding saved.",
	"org-deleted":        "Organization deleted; its app sessions were ended.",
	"person-created":     "Person created.",
	"person-updated":     "Person updated.",
	"person-deleted":     "Person deleted; every session of theirs was ended.",
	"membership-created": "Membership created.",
	"membership-updated": "Membership updated.",
	"membership-deleted": "Membership deleted.",
	"client-updated":     "Client updated.",
	"client-deleted":     "Client deleted.",
	"key-rotated":        "A new signing key was added.",
	"totp-removed":       "Authenticator app removed.",
	"lockouts-cleared":   "Sign-in lockouts cleared.",
	"grant-created":      "Administrator grant added.",
	"grant-deleted":      "Grant removed; it stopped working at once.",
	"apikey-deleted":     "API key deleted; it stopped working at once.",
	"org-updated":        "Organization updated.",
	"invitation-created": "Invitation sent.",
	"invitation-deleted": "Invitation withdrawn; its link no longer works.",
	"verify-sent":        "A link to prove the address is on its way; it works for 24 hours.",
	"idp-created":        "Identity provider created. Register the addresses below at the upstream.",
	"idp-updated":        "Identity provider updated.",
	"idp-deleted":        "Identity provider deleted; the sessions opened through it were ended.",
	"identity-unlinked":  "Link removed; the sessions opened through it were ended.",
}

// breakable escapes a URI for HTML and lets the browser break it only
// after a slash, a dot, ?, & or =, never in the middle of a word.
func breakable(s string) template.HTML {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(template.HTMLEscapeString(string(r)))
		switch r {
		case '/', '.', '?', '&', '=':
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String()) // #nosec G203 -- every rune of s is escaped above; only <wbr> is added
}
