package demorp

import (
	"bytes"
	_ "embed"
	"html/template"
	"net/http"
	"strconv"
	"time"
)

//go:embed page.html
var pageHTML string

//go:embed style.css
var styleCSS []byte

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"time": func(t time.Time) string { return t.Format("15:04:05") },
}).Parse(pageHTML))

// view is the data of the one page demo-rp has.
type view struct {
	Issuer, ClientID string
	Session          *session // a copy; nil when signed out
	Notice           string
	ErrorTitle       string
	Error            string
	Events           []Event
}

func (a *App) newView(r *http.Request) *view {
	return &view{Issuer: a.cfg.Issuer, ClientID: a.cfg.ClientID, Session: a.current(r), Events: a.Events()}
}

// contentSecurityPolicy: no script, our stylesheet only. form-action is
// left out on purpose: the sign-out form's answer redirects to the
// provider, and browsers apply form-action to that redirect.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'"

func (a *App) render(w http.ResponseWriter, status int, v *view) {
	var buf bytes.Buffer
	if err := page.Execute(&buf, v); err != nil {
		a.log.Error("render", "err", err)
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

func serveStyle(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(styleCSS)
}
