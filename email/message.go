package email

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
)

// Message is what a person receives: the subject, a plain text body, an
// HTML alternative, and the link it carries ("" for a notice). It is the
// sealed body of an fsm.OutgoingEmail.
type Message struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html,omitempty"`
	Link    string `json:"link,omitempty"`
	Locale  string `json:"locale,omitempty"` // the language it is written in (Compose)
}

// Templates: what a message says. Each is one kind of fsm's (Kind).
const (
	Invitation             = "invitation"               // Link, OrgName, Expires
	VerifyEmail            = "verify_email"             // Link, Email, Expires
	PasswordReset          = "password_reset"           // Link, Expires
	PasswordResetDirectory = "password_reset_directory" // Directory: the person signs in with their directory
	EmailChanged           = "email_changed"            // Email: the new address
	Registration           = "registration"             // Link, OrgName, Expires
	RegistrationExists     = "registration_exists"      // ForgotURL: the address has an account already
)

// kinds maps each template to the kind of message it is.
var kinds = map[string]string{
	Invitation:             fsm.EmailInvitation,
	VerifyEmail:            fsm.EmailVerify,
	PasswordReset:          fsm.EmailPasswordReset,
	PasswordResetDirectory: fsm.EmailPasswordReset,
	EmailChanged:           fsm.EmailChanged,
	Registration:           fsm.EmailRegistration,
	RegistrationExists:     fsm.EmailRegistration,
}

// Kind is the kind (fsm.EmailKinds) of a template's messages; "" for an
// unknown template.
func Kind(template string) string { return kinds[template] }

// Data fills a template.
type Data struct {
	Site      string        // who sends: the site's name (the issuer's host until branding names it)
	Link      string        // the link to follow
	OrgName   string        // the organization joined
	Email     string        // the address concerned
	Directory string        // the directory's name
	ForgotURL string        // the forgotten-password page
	Expires   time.Duration // how long the link works, written in the message's language
}

// duration is d in words in the language of index i of i18n.Languages,
// as the catalog's plurals write it: "30 minutes", "24 hours", "7 days"
// (the largest unit that divides it; minutes rounded up); "" for none.
func duration(i int, d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d%(24*time.Hour) == 0:
		return catalog.TextAt(i, "duration.days", int(d/(24*time.Hour)))
	case d%time.Hour == 0:
		return catalog.TextAt(i, "duration.hours", int(d/time.Hour))
	default:
		return catalog.TextAt(i, "duration.minutes", int((d+time.Minute-1)/time.Minute))
	}
}

//go:embed templates/*.txt templates/*.html
var files embed.FS

//go:embed locales
var localeFiles embed.FS

// catalog holds the messages' texts, locales/<tag>/*.json (i18n.Load: a
// language that lacks a key or a placeholder of English's is refused).
var catalog = mustLoad()

func mustLoad() *i18n.Catalog {
	c, err := i18n.Load(localeFiles, "locales")
	if err != nil {
		panic(fmt.Sprintf("email: %v", err))
	}
	return c
}

// languages are the languages of the mail, English (the fallback) first.
var languages = i18n.Languages()

// funcs are the templates' functions bound to the language of index i:
// t (a text of the catalog with its arguments), duration (a link's
// lifetime in words) and lang (the BCP 47 tag, for <html lang>).
func funcs(i int) map[string]any {
	return map[string]any{
		"t":        func(key string, args ...any) string { return catalog.TextAt(i, key, args...) },
		"duration": func(d time.Duration) string { return duration(i, d) },
		"lang":     func() string { return languages[i].String() },
	}
}

// The templates, parsed once for each language (by index in languages)
// with funcs bound to it.
var textTemplates, htmlTemplates = parseAll()

func parseAll() ([]*template.Template, []*htmltemplate.Template) {
	var texts []*template.Template
	var htmls []*htmltemplate.Template
	for i := range languages {
		texts = append(texts, template.Must(template.New("").Funcs(funcs(i)).Option("missingkey=error").ParseFS(files, "templates/*.txt")))
		htmls = append(htmls, htmltemplate.Must(htmltemplate.New("").Funcs(funcs(i)).Option("missingkey=error").ParseFS(files, "templates/*.html")))
	}
	return texts, htmls
}

// Locale is the language of Languages that locale (a BCP 47 tag) names
// exactly, or English: the language a message asked for in locale is
// written in.
func Locale(locale string) string { return languages[index(locale)].String() }

// index is the index in languages of the language locale names exactly,
// 0 (English) for any other.
func index(locale string) int {
	for i, t := range languages {
		if t.String() == locale {
			return i
		}
	}
	return 0
}

// Compose renders template for d in the language locale (one of
// Languages; any other is English). The subject is the text template's
// "<name>.subject" template, on one line; the text the rest; the HTML
// alternative comes from the template of the same name in HTML, with
// <html lang> of its language. Message.Locale is the language used.
func Compose(name, locale string, d Data) (Message, error) {
	if kinds[name] == "" {
		return Message{}, fmt.Errorf("email: no template %q", name)
	}
	i := index(locale)
	locale = languages[i].String()
	var subject, text, html bytes.Buffer
	if err := textTemplates[i].ExecuteTemplate(&subject, name+".subject", d); err != nil {
		return Message{}, fmt.Errorf("email: %s: %w", name, err)
	}
	if err := textTemplates[i].ExecuteTemplate(&text, name+".txt", d); err != nil {
		return Message{}, fmt.Errorf("email: %s: %w", name, err)
	}
	if err := htmlTemplates[i].ExecuteTemplate(&html, name+".html", d); err != nil {
		return Message{}, fmt.Errorf("email: %s: %w", name, err)
	}
	return Message{Subject: oneLine(subject.String()), Text: text.String(), HTML: html.String(), Link: d.Link, Locale: locale}, nil
}

// oneLine is s with every run of spaces and control characters (a line
// break in a name it holds) made one space: a subject is one header line.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
}

// aad binds a sealed body to its recipient and kind: a body moved to
// another message does not open.
func aad(to, kind string) string { return "email/" + kind + "/" + strings.ToLower(to) }

// Outgoing seals m for the outbox: the message of kind (fsm.EmailKinds)
// to address to, in locale, about the person userID ("" for none). A
// composed message's own language (m.Locale) is the one recorded: the
// language it is written in, English when locale had no catalog.
func Outgoing(k *kek.KEK, to, kind, locale, userID string, m Message) (fsm.OutgoingEmail, error) {
	if m.Locale != "" {
		locale = m.Locale
	}
	if strings.ContainsAny(to, "\r\n") || strings.ContainsAny(m.Subject, "\r\n") {
		return fsm.OutgoingEmail{}, errors.New("email: a line break in the address or subject")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fsm.OutgoingEmail{}, err
	}
	sealed, err := k.Seal(b, aad(to, kind))
	if err != nil {
		return fsm.OutgoingEmail{}, err
	}
	if len(sealed) > fsm.MaxEmailBody {
		return fsm.OutgoingEmail{}, fmt.Errorf("email: message of %d bytes is over %d", len(sealed), fsm.MaxEmailBody)
	}
	return fsm.OutgoingEmail{To: to, Kind: kind, Locale: locale, UserID: userID, Body: sealed}, nil
}

// Open reads the body of e back.
func Open(k *kek.KEK, e fsm.Email) (Message, error) {
	b, err := k.Open(e.Body, aad(e.To, e.Kind))
	if err != nil {
		return Message{}, err
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, fmt.Errorf("email: body of %s: %w", e.ID, err)
	}
	return m, nil
}

// TokenBytes is the size of a link's token: 256 random bits.
const TokenBytes = 32

// NewToken returns a link's token (base64url, no padding, 43 characters)
// and the hash the state keeps (fsm.Link.Hash; HashToken of the token).
func NewToken() (token, hash string, err error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token), nil
}

// HashToken is the hash under which a link's token is stored: hex
// SHA-256. The token is 256 random bits, so no salt or stretching is
// needed. A string that cannot be a token ("" or longer than a token)
// hashes to "".
func HashToken(token string) string {
	if token == "" || len(token) > 64 {
		return ""
	}
	return password.HashSecret(token)
}

// Site is the name messages go out under until branding names the site:
// the issuer's host.
func Site(issuer string) string {
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return issuer
}
