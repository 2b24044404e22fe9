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

	"github.com/oidcd/oidcd/fsm"
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
	Expires   time.Duration // how long the link works
}

// ExpiresText is Expires in words: "30 minutes", "24 hours", "7 days".
func (d Data) ExpiresText() string {
	switch e := d.Expires; {
	case e <= 0:
		return ""
	case e%(24*time.Hour) == 0:
		return plural(int(e/(24*time.Hour)), "day")
	case e%time.Hour == 0:
		return plural(int(e/time.Hour), "hour")
	default:
		return plural(int((e+time.Minute-1)/time.Minute), "minute")
	}
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

//go:embed templates/*.txt templates/*.html
var files embed.FS

var (
	textTemplates = template.Must(template.New("").Option("missingkey=error").ParseFS(files, "templates/*.txt"))
	htmlTemplates = htmltemplate.Must(htmltemplate.New("").Option("missingkey=error").ParseFS(files, "templates/*.html"))
)

// Compose renders template for d. The subject is the template's first
// line ("Subject: ..."), the text the rest; the HTML alternative comes
// from the template of the same name in HTML. Locale is the language the
// message is in; today every message is in English ("en").
func Compose(name, locale string, d Data) (Message, error) {
	if kinds[name] == "" {
		return Message{}, fmt.Errorf("email: no template %q", name)
	}
	var text bytes.Buffer
	if err := textTemplates.ExecuteTemplate(&text, name+".txt", d); err != nil {
		return Message{}, fmt.Errorf("email: %s: %w", name, err)
	}
	subject, body, ok := strings.Cut(text.String(), "\n")
	subject, ok2 := strings.CutPrefix(subject, "Subject: ")
	if !ok || !ok2 {
		return Message{}, fmt.Errorf("email: %s: the text template does not start with a Subject: line", name)
	}
	var html bytes.Buffer
	if err := htmlTemplates.ExecuteTemplate(&html, name+".html", d); err != nil {
		return Message{}, fmt.Errorf("email: %s: %w", name, err)
	}
	return Message{Subject: strings.TrimSpace(subject), Text: strings.TrimLeft(body, "\n"), HTML: html.String(), Link: d.Link}, nil
}

// aad binds a sealed body to its recipient and kind: a body moved to
// another message does not open.
func aad(to, kind string) string { return "email/" + kind + "/" + strings.ToLower(to) }

// Outgoing seals m for the outbox: the message of kind (fsm.EmailKinds)
// to address to, in locale, about the person userID ("" for none).
func Outgoing(k *kek.KEK, to, kind, locale, userID string, m Message) (fsm.OutgoingEmail, error) {
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
