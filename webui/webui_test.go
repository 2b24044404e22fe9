package webui

import (
	"flag"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func newUI(t testing.TB) *UI {
	t.Helper()
	u, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return u
}

var sampleCommon = Common{
	AppName:   "Acme Books",
	CSRFToken: "csrf-7f3a9c",
	Action:    "/authorize?client_id=acme&state=s1234567",
	Step:      "step-42",
}

// pickerCommon is the step data of the organization picker, whose
// action carries a query that the GET search form must drop.
var pickerCommon = Common{
	AppName:   "Acme Books",
	CSRFToken: "csrf-7f3a9c",
	Action:    "/authorize/organization?q=ac",
	Step:      "step-43",
}

func withTitle(c Common, title string) Common { c.Title = title; return c }

// pageCase is one rendering of one page and what the form rules (package
// doc) require of it.
type pageCase struct {
	name         string // also the golden file name
	status       int
	render       func(*UI, http.ResponseWriter, int)
	common       *Common  // the step data, nil for pages without forms
	wantInputs   []string // names of the visible inputs, in order
	wantRequired []string // names of the inputs marked required
	wantButtons  []string // name=value of the named buttons, in order
	wantGETForm  bool     // the picker's search form
	wantText     []string // text the page must show
	wantNoText   []string // text the page must not show
	check        func(t *testing.T, doc document)
}

func pageCases() []pageCase {
	return []pageCase{
		{
			name:   "signin",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.SignIn(w, s, SignInPage{Common: sampleCommon})
			},
			common:       &sampleCommon,
			wantInputs:   []string{"email", "password"},
			wantRequired: []string{"email", "password"},
			wantButtons:  []string{"method=password"},
			wantText:     []string{"Sign in", "Acme Books"},
			wantNoText:   []string{"Phone number", "Text me a code"},
		},
		{
			name:   "signin_sms_error",
			status: http.StatusBadRequest,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.SignIn(w, s, SignInPage{
					Common:     withTitle(sampleCommon, "Sign in to Acme"),
					Email:      "ada@example.com",
					Error:      "The email address or password is wrong.",
					SMSEnabled: true,
					Phone:      "+15551234567",
				})
			},
			common:      &sampleCommon,
			wantInputs:  []string{"email", "password", "phone"},
			wantButtons: []string{"method=password", "method=sms"},
			wantText:    []string{"Sign in to Acme", "The email address or password is wrong.", "Phone number"},
			check: func(t *testing.T, doc document) {
				for name, want := range map[string]string{"email": "ada@example.com", "phone": "+15551234567"} {
					if got := inputNamed(t, doc, name).attr["value"]; got != want {
						t.Errorf("input %s value: got %q, want %q", name, got, want)
					}
				}
				if in := inputNamed(t, doc, "password"); in.has("value") {
					t.Errorf("password input has a value %q", in.attr["value"])
				}
				for _, b := range doc.root.all("button") {
					if b.attr["value"] == "sms" && !b.has("formnovalidate") {
						t.Error("sms button lacks formnovalidate")
					}
				}
			},
		},
		{
			name:   "secondfactor",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.SecondFactor(w, s, SecondFactorPage{Common: sampleCommon, Methods: []string{MethodPasskey, MethodOTP, MethodRecovery}})
			},
			common:      &sampleCommon,
			wantInputs:  []string{"code"},
			wantButtons: []string{"method=otp", "method=recovery", "method=passkey"},
			check: func(t *testing.T, doc document) {
				if got := inputNamed(t, doc, "code").attr["inputmode"]; got != "numeric" {
					t.Errorf("code inputmode: got %q, want %q", got, "numeric")
				}
			},
		},
		{
			name:   "secondfactor_otp_error",
			status: http.StatusBadRequest,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.SecondFactor(w, s, SecondFactorPage{Common: sampleCommon, Methods: []string{MethodOTP}, Error: "That code is not right."})
			},
			common:       &sampleCommon,
			wantInputs:   []string{"code"},
			wantRequired: []string{"code"},
			wantButtons:  []string{"method=otp"},
			wantText:     []string{"That code is not right."},
			wantNoText:   []string{"passkey", "recovery"},
		},
		{
			name:   "secondfactor_passkey",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.SecondFactor(w, s, SecondFactorPage{Common: sampleCommon, Methods: []string{MethodPasskey}})
			},
			common:      &sampleCommon,
			wantButtons: []string{"method=passkey"},
		},
		{
			name:   "picker",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.OrganizationPicker(w, s, PickerPage{
					Common: pickerCommon,
					Query:  "ac",
					Orgs: []PickerOrg{
						{ID: "0b6f4c7e-1d2a-4e8b-9c3d-5a6b7c8d9e0f", Name: "Acme Corp", Slug: "acme"},
						{ID: "7e1a2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b", Name: "Acme Labs", Slug: "acme-labs"},
					},
					PrevURL: "/authorize/organization?q=ac&before=0b6f4c7e-1d2a-4e8b-9c3d-5a6b7c8d9e0f",
					NextURL: "/authorize/organization?q=ac&after=7e1a2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b",
				})
			},
			common:      &pickerCommon,
			wantInputs:  []string{"q"},
			wantButtons: []string{"organization_id=0b6f4c7e-1d2a-4e8b-9c3d-5a6b7c8d9e0f", "organization_id=7e1a2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b"},
			wantGETForm: true,
			wantText:    []string{"Choose an organization", "Search organizations", "Acme Corp", "acme-labs"},
			check: func(t *testing.T, doc document) {
				q := inputNamed(t, doc, "q")
				if q.attr["maxlength"] != "64" || q.attr["value"] != "ac" {
					t.Errorf("q: got maxlength %q value %q, want 64 and ac", q.attr["maxlength"], q.attr["value"])
				}
				want := []string{
					"prev /authorize/organization?q=ac&before=0b6f4c7e-1d2a-4e8b-9c3d-5a6b7c8d9e0f",
					"next /authorize/organization?q=ac&after=7e1a2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b",
				}
				if got := links(doc); !slices.Equal(got, want) {
					t.Errorf("links: got %q, want %q", got, want)
				}
			},
		},
		{
			name:   "picker_empty",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.OrganizationPicker(w, s, PickerPage{Common: pickerCommon, Query: "zzz", Error: "Choose an organization to continue."})
			},
			common:      &pickerCommon,
			wantInputs:  []string{"q"},
			wantGETForm: true,
			wantText:    []string{"No organizations found.", "Choose an organization to continue."},
			check: func(t *testing.T, doc document) {
				if got := links(doc); len(got) != 0 {
					t.Errorf("links: got %q, want none", got)
				}
			},
		},
		{
			name:   "consent",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.Consent(w, s, ConsentPage{
					Common: sampleCommon,
					Scopes: []ScopeLine{
						{Name: "openid", Description: "Know who you are"},
						{Name: "email", Description: "See your email address"},
						{Name: "profile", Description: "See your name"},
					},
					OrgName: "Acme Corp",
					Email:   "ada@example.com",
				})
			},
			common:      &sampleCommon,
			wantButtons: []string{"decision=allow", "decision=deny"},
			wantText:    []string{"Acme Books", "Acme Corp", "Know who you are", "openid", "See your email address", "profile", "Signed in as ada@example.com"},
		},
		{
			name:   "error",
			status: http.StatusBadRequest,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.Error(w, s, ErrorPage{Title: "This sign-in link is not valid", Message: "The app sent an invalid request.", Reference: "ref-9F2C41"})
			},
			wantText: []string{"This sign-in link is not valid", "The app sent an invalid request.", "ref-9F2C41"},
			check: func(t *testing.T, doc document) {
				if got := links(doc); len(got) != 0 {
					t.Errorf("error page links: got %q, want none", got)
				}
			},
		},
		{
			name:   "message",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.Message(w, s, MessagePage{Title: "You are signed out", Message: "You can close this window.", LinkURL: "/account", LinkText: "Sign in again"})
			},
			wantText: []string{"You are signed out", "You can close this window.", "Sign in again"},
			check: func(t *testing.T, doc document) {
				if got, want := links(doc), []string{" /account"}; !slices.Equal(got, want) {
					t.Errorf("links: got %q, want %q", got, want)
				}
			},
		},
		{
			name:   "signin_links",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.SignIn(w, s, SignInPage{Common: sampleCommon, ForgotURL: "/password/forgot?r=ctx", RegisterURL: "/register?r=ctx"})
			},
			common:       &sampleCommon,
			wantInputs:   []string{"email", "password"},
			wantRequired: []string{"email", "password"},
			wantButtons:  []string{"method=password"},
			wantText:     []string{"Forgot your password?", "Create an account"},
			check: func(t *testing.T, doc document) {
				if got, want := links(doc), []string{" /password/forgot?r=ctx", " /register?r=ctx"}; !slices.Equal(got, want) {
					t.Errorf("links: got %q, want %q", got, want)
				}
			},
		},
		{
			name:   "address_forgot",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.Address(w, s, AddressPage{Common: withTitle(sampleCommon, "Forgot your password?"), Lead: "We send a link to choose a new one.",
					Button: "Send the link", BackURL: "/authorize?client_id=acme", BackText: "Back to sign in"})
			},
			common:       &sampleCommon,
			wantInputs:   []string{"email"},
			wantRequired: []string{"email"},
			wantText:     []string{"Forgot your password?", "We send a link to choose a new one.", "Send the link", "Back to sign in"},
			check: func(t *testing.T, doc document) {
				if got := inputNamed(t, doc, "email").attr["autocomplete"]; got != "email" {
					t.Errorf("email autocomplete: got %q, want email", got)
				}
				if got, want := links(doc), []string{" /authorize?client_id=acme"}; !slices.Equal(got, want) {
					t.Errorf("links: got %q, want %q", got, want)
				}
			},
		},
		{
			name:   "address_register_error",
			status: http.StatusBadRequest,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.Address(w, s, AddressPage{Common: withTitle(sampleCommon, "Create an account"), Email: "ada@evil.example",
					Error: "Only addresses at acme.example can register here."})
			},
			common:       &sampleCommon,
			wantInputs:   []string{"email"},
			wantRequired: []string{"email"},
			wantText:     []string{"Create an account", "Only addresses at acme.example can register here."},
			check: func(t *testing.T, doc document) {
				in := inputNamed(t, doc, "email")
				if in.attr["value"] != "ada@evil.example" || in.attr["aria-invalid"] != "true" {
					t.Errorf("email input: value %q aria-invalid %q", in.attr["value"], in.attr["aria-invalid"])
				}
				if got := links(doc); len(got) != 0 {
					t.Errorf("links: got %q, want none", got)
				}
			},
		},
		{
			name:   "newpassword",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.NewPassword(w, s, NewPasswordPage{Common: withTitle(sampleCommon, "Choose a new password"), Email: "ada@example.com", Button: "Save password"})
			},
			common:       &sampleCommon,
			wantInputs:   []string{"new_password"},
			wantRequired: []string{"new_password"},
			wantText:     []string{"Choose a new password", "ada@example.com", "At least 8 characters."},
			check: func(t *testing.T, doc document) {
				in := inputNamed(t, doc, "new_password")
				if in.attr["minlength"] != "8" || in.attr["maxlength"] != "1024" {
					t.Errorf("new_password: minlength %q maxlength %q", in.attr["minlength"], in.attr["maxlength"])
				}
				if got := inputNamed(t, doc, "username").attr["value"]; got != "ada@example.com" {
					t.Errorf("username: got %q", got)
				}
			},
		},
		{
			name:   "newpassword_error",
			status: http.StatusBadRequest,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.NewPassword(w, s, NewPasswordPage{Common: sampleCommon, Error: "The new password must be 8 to 1024 characters long."})
			},
			common:       &sampleCommon,
			wantInputs:   []string{"new_password"},
			wantRequired: []string{"new_password"},
			wantText:     []string{"Choose a password", "The new password must be 8 to 1024 characters long."},
			check: func(t *testing.T, doc document) {
				if got := inputNamed(t, doc, "new_password").attr["aria-describedby"]; got != "new-password-hint form-error" {
					t.Errorf("aria-describedby: got %q", got)
				}
			},
		},
		{
			name:   "confirm",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.Confirm(w, s, ConfirmPage{Common: withTitle(sampleCommon, "Confirm your email address"), Lead: "Confirm that ada@example.com is yours.", Button: "Confirm"})
			},
			common:   &sampleCommon,
			wantText: []string{"Confirm your email address", "Confirm that ada@example.com is yours."},
			check: func(t *testing.T, doc document) {
				if n := len(doc.root.all("button")); n != 1 {
					t.Errorf("buttons: got %d, want 1", n)
				}
			},
		},
		{
			name:   "message_declined",
			status: http.StatusOK,
			render: func(u *UI, w http.ResponseWriter, s int) {
				u.Message(w, s, MessagePage{Title: "You declined", Message: "Nothing was shared with the app."})
			},
			wantText: []string{"You declined", "Nothing was shared with the app."},
			check: func(t *testing.T, doc document) {
				if got := links(doc); len(got) != 0 {
					t.Errorf("links: got %q, want none", got)
				}
			},
		},
	}
}

func TestPages(t *testing.T) {
	u := newUI(t)
	for _, tc := range pageCases() {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.render(u, rec, tc.status)
			if rec.Code != tc.status {
				t.Errorf("status: got %d, want %d", rec.Code, tc.status)
			}
			body := rec.Body.String()
			checkHeaders(t, rec)
			if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(len(body)); got != want {
				t.Errorf("Content-Length: got %q, want %q", got, want)
			}
			doc := parseHTML(t, body)
			checkDocument(t, u, doc)
			checkNoScriptOrStyle(t, body, doc)
			checkLabels(t, doc)
			checkAutocomplete(t, doc)
			checkAlerts(t, doc)
			checkForms(t, doc, tc)

			if got := visibleInputNames(doc); !slices.Equal(got, tc.wantInputs) {
				t.Errorf("visible inputs: got %q, want %q", got, tc.wantInputs)
			}
			var required []string
			for _, in := range visibleInputs(doc) {
				if in.has("required") {
					required = append(required, in.attr["name"])
				}
			}
			if !slices.Equal(required, tc.wantRequired) {
				t.Errorf("required inputs: got %q, want %q", required, tc.wantRequired)
			}
			if got := namedButtons(doc); !slices.Equal(got, tc.wantButtons) {
				t.Errorf("buttons: got %q, want %q", got, tc.wantButtons)
			}
			text := doc.root.textContent()
			for _, s := range tc.wantText {
				if !strings.Contains(text, s) {
					t.Errorf("page text lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tc.wantNoText {
				if strings.Contains(strings.ToLower(text), strings.ToLower(s)) {
					t.Errorf("page text has %q:\n%s", s, text)
				}
			}
			if tc.check != nil {
				tc.check(t, doc)
			}
			golden(t, u, tc.name, body)
		})
	}
}

// TestSignInSMS checks that the text-message parts appear only when
// enabled, and that the password button stays first, the default on Enter.
func TestSignInSMS(t *testing.T) {
	u := newUI(t)
	for _, sms := range []bool{false, true} {
		t.Run(strconv.FormatBool(sms), func(t *testing.T) {
			rec := httptest.NewRecorder()
			u.SignIn(rec, http.StatusOK, SignInPage{Common: sampleCommon, SMSEnabled: sms, Phone: "+15550000000"})
			body := rec.Body.String()
			doc := parseHTML(t, body)
			phones := doc.root.find(func(n *node) bool { return n.tag == "input" && n.attr["name"] == "phone" })
			if got, want := len(phones) == 1, sms; got != want {
				t.Errorf("phone input present: got %v, want %v", got, want)
			}
			if got, want := slices.Contains(namedButtons(doc), "method=sms"), sms; got != want {
				t.Errorf("method=sms button present: got %v, want %v", got, want)
			}
			if got, want := strings.Contains(body, "15550000000"), sms; got != want {
				t.Errorf("phone number shown: got %v, want %v", got, want)
			}
			if sms {
				if got, want := phones[0].attr["value"], "+15550000000"; got != want {
					t.Errorf("phone value: got %q, want %q", got, want)
				}
			}
			buttons := doc.root.all("button")
			if len(buttons) == 0 || buttons[0].attr["value"] != "password" {
				t.Errorf("first button: got %v, want method=password", namedButtons(doc))
			}
			for _, name := range []string{"email", "password"} {
				if got, want := inputNamed(t, doc, name).has("required"), !sms; got != want {
					t.Errorf("%s required: got %v, want %v", name, got, want)
				}
			}
		})
	}
}

// TestSecondFactorMethods checks that each subset of methods gives exactly
// its buttons, code methods first.
func TestSecondFactorMethods(t *testing.T) {
	u := newUI(t)
	tests := []struct {
		methods     []string
		wantButtons []string
		wantCode    bool
	}{
		{nil, nil, false},
		{[]string{"passkey"}, []string{"method=passkey"}, false},
		{[]string{"otp"}, []string{"method=otp"}, true},
		{[]string{"recovery"}, []string{"method=recovery"}, true},
		{[]string{"recovery", "otp"}, []string{"method=otp", "method=recovery"}, true},
		{[]string{"passkey", "recovery"}, []string{"method=recovery", "method=passkey"}, true},
		{[]string{"otp", "passkey", "recovery"}, []string{"method=otp", "method=recovery", "method=passkey"}, true},
		{[]string{"sms", "otp"}, []string{"method=otp"}, true}, // unknown methods are ignored
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.methods, "+"), func(t *testing.T) {
			rec := httptest.NewRecorder()
			u.SecondFactor(rec, http.StatusOK, SecondFactorPage{Common: sampleCommon, Methods: tc.methods})
			doc := parseHTML(t, rec.Body.String())
			if got := namedButtons(doc); !slices.Equal(got, tc.wantButtons) {
				t.Errorf("buttons: got %q, want %q", got, tc.wantButtons)
			}
			if got := slices.Equal(visibleInputNames(doc), []string{"code"}); got != tc.wantCode {
				t.Errorf("code input: got %v, want %v", got, tc.wantCode)
			}
			checkLabels(t, doc)
			checkAutocomplete(t, doc)
		})
	}
}

const hostile = `<script>alert(1)</script>"'><img src=x onerror=alert(1)>`

// TestEscaping renders every page with hostile strings in every field and
// checks they come out as text, never as markup.
func TestEscaping(t *testing.T) {
	u := newUI(t)
	c := Common{Title: hostile, AppName: hostile, CSRFToken: hostile, Action: "javascript:alert(1)", Step: hostile}
	pages := []struct {
		name   string
		render func(w http.ResponseWriter)
	}{
		{"signin", func(w http.ResponseWriter) {
			u.SignIn(w, 200, SignInPage{Common: c, Email: hostile, Error: hostile, SMSEnabled: true, Phone: hostile})
		}},
		{"secondfactor", func(w http.ResponseWriter) {
			u.SecondFactor(w, 200, SecondFactorPage{Common: c, Methods: []string{"otp", "passkey", hostile}, Error: hostile})
		}},
		{"picker", func(w http.ResponseWriter) {
			u.OrganizationPicker(w, 200, PickerPage{Common: c, Query: hostile, Orgs: []PickerOrg{{ID: hostile, Name: hostile, Slug: hostile}},
				PrevURL: "javascript:alert(1)", NextURL: hostile, Error: hostile})
		}},
		{"consent", func(w http.ResponseWriter) {
			u.Consent(w, 200, ConsentPage{Common: c, Scopes: []ScopeLine{{Name: hostile, Description: hostile}}, OrgName: hostile, Email: hostile})
		}},
		{"error", func(w http.ResponseWriter) {
			u.Error(w, 400, ErrorPage{Title: hostile, Message: hostile, Reference: hostile})
		}},
		{"message", func(w http.ResponseWriter) {
			u.Message(w, 200, MessagePage{Title: hostile, Message: hostile, LinkURL: "javascript:alert(1)", LinkText: hostile})
		}},
		{"signin links", func(w http.ResponseWriter) {
			u.SignIn(w, 200, SignInPage{Common: c, Email: hostile, ForgotURL: "javascript:alert(1)", RegisterURL: hostile})
		}},
		{"address", func(w http.ResponseWriter) {
			u.Address(w, 200, AddressPage{Common: c, Lead: hostile, Email: hostile, Error: hostile, Button: hostile, BackURL: "javascript:alert(1)", BackText: hostile})
		}},
		{"newpassword", func(w http.ResponseWriter) {
			u.NewPassword(w, 200, NewPasswordPage{Common: c, Lead: hostile, Email: hostile, Error: hostile, Button: hostile})
		}},
		{"confirm", func(w http.ResponseWriter) {
			u.Confirm(w, 200, ConfirmPage{Common: c, Lead: hostile, Error: hostile, Button: hostile})
		}},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			p.render(rec)
			body := rec.Body.String()
			if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
				t.Errorf("hostile markup survived:\n%s", body)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("hostile text not shown escaped:\n%s", body)
			}
			doc := parseHTML(t, body)
			checkNoScriptOrStyle(t, body, doc)
			if img := doc.root.all("img"); len(img) != 0 {
				t.Errorf("got %d <img> elements, want none", len(img))
			}
			// The text survives intact: escaped, not stripped.
			if h1 := doc.root.all("h1"); len(h1) != 1 || h1[0].textContent() != strings.Join(strings.Fields(hostile), " ") {
				t.Errorf("h1 text: got %q, want the hostile string", doc.root.all("h1")[0].textContent())
			}
			for _, n := range doc.root.find(func(n *node) bool { return n.has("href") || n.has("action") }) {
				for _, a := range []string{"href", "action"} {
					if v, ok := n.attr[a]; ok && strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "javascript:") {
						t.Errorf("<%s %s=%q>: javascript URL survived", n.tag, a, v)
					}
				}
			}
			for _, in := range doc.root.find(func(n *node) bool {
				return n.tag == "input" && n.attr["type"] == "hidden" && n.attr["name"] == "csrf_token"
			}) {
				if in.attr["value"] != hostile {
					t.Errorf("csrf_token: got %q, want it round-tripped", in.attr["value"])
				}
			}
		})
	}
}

func TestStatic(t *testing.T) {
	u := newUI(t)
	if !regexp.MustCompile(`^/static/style\.css\?v=[0-9a-f]{16}$`).MatchString(u.StyleURL()) {
		t.Fatalf("StyleURL: got %q, want /static/style.css?v=<16 hex>", u.StyleURL())
	}
	css, err := staticFiles.ReadFile("static/style.css")
	if err != nil {
		t.Fatal(err)
	}
	_, hash, _ := strings.Cut(u.StyleURL(), "?v=")
	tests := []struct {
		name, method, target string
		header               map[string]string
		wantStatus           int
		wantCache            string
		wantBody             bool
	}{
		{"versioned", "GET", u.StyleURL(), nil, 200, "public, max-age=31536000, immutable", true},
		{"unversioned", "GET", "/static/style.css", nil, 200, "no-cache", true},
		{"stale version", "GET", "/static/style.css?v=0000000000000000", nil, 200, "no-cache", true},
		{"head", "HEAD", u.StyleURL(), nil, 200, "public, max-age=31536000, immutable", false},
		{"etag", "GET", u.StyleURL(), map[string]string{"If-None-Match": `"` + hash + `"`}, 304, "public, max-age=31536000, immutable", false},
		{"missing", "GET", "/static/nope.css", nil, 404, "", false},
		{"directory", "GET", "/static/", nil, 404, "", false},
		{"traversal", "GET", "/static/../static/style.css", nil, 404, "", false},
		{"post", "POST", u.StyleURL(), nil, 405, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/", nil)
			req.URL.Path, req.URL.RawQuery, _ = strings.Cut(tc.target, "?")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			u.Static().ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status: got %d, want %d", rec.Code, tc.wantStatus)
			}
			if rec.Code != 200 && rec.Code != 304 {
				return
			}
			if got := rec.Header().Get("Cache-Control"); got != tc.wantCache {
				t.Errorf("Cache-Control: got %q, want %q", got, tc.wantCache)
			}
			if rec.Code == 200 {
				if got, want := rec.Header().Get("Content-Type"), "text/css; charset=utf-8"; got != want {
					t.Errorf("Content-Type: got %q, want %q", got, want)
				}
				if got, want := rec.Header().Get("X-Content-Type-Options"), "nosniff"; got != want {
					t.Errorf("X-Content-Type-Options: got %q, want %q", got, want)
				}
			}
			if got := rec.Body.String() == string(css); got != tc.wantBody {
				t.Errorf("body is the stylesheet: got %v, want %v", got, tc.wantBody)
			}
		})
	}

	// Mounted behind http.StripPrefix the handler serves the same file.
	mux := http.NewServeMux()
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", u.Static()))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/assets/style.css?v="+hash, nil))
	if rec.Code != 200 || rec.Body.String() != string(css) {
		t.Errorf("behind StripPrefix: got status %d, want 200 and the stylesheet", rec.Code)
	}
}

// TestRenderFailure checks that a template error yields a plain 500 and
// none of the half-rendered page.
func TestRenderFailure(t *testing.T) {
	u := newUI(t)
	broken := template.Must(template.New("layout").Parse(`<p>half a page{{.NoSuchField}}</p>`))
	rec := httptest.NewRecorder()
	u.render(rec, http.StatusOK, localized{broken}, SignInPage{})
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status: got %d, want 500", rec.Code)
	}
	if strings.Contains(rec.Body.String(), "half a page") {
		t.Errorf("body: got %q, want no part of the page", rec.Body.String())
	}
	if got, want := rec.Header().Get("Content-Type"), "text/plain; charset=utf-8"; got != want {
		t.Errorf("Content-Type: got %q, want %q", got, want)
	}
	if got, want := rec.Header().Get("Cache-Control"), "no-store"; got != want {
		t.Errorf("Cache-Control: got %q, want %q", got, want)
	}
}

func TestDefaultStatus(t *testing.T) {
	u := newUI(t)
	rec := httptest.NewRecorder()
	u.Message(rec, 0, MessagePage{Title: "Hi"})
	if rec.Code != http.StatusOK {
		t.Errorf("status: got %d, want 200", rec.Code)
	}
}

func TestPathOnly(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/authorize/organization?step=1", "/authorize/organization"},
		{"/authorize/organization#x", "/authorize/organization"},
		{"/authorize", "/authorize"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := pathOnly(tc.in); got != tc.want {
			t.Errorf("pathOnly(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func BenchmarkSignIn(b *testing.B) {
	u := newUI(b)
	p := SignInPage{Common: sampleCommon, Email: "ada@example.com", Error: "The email address or password is wrong.", SMSEnabled: true}
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		u.SignIn(rec, http.StatusOK, p)
	}
}

// ---- checks ----

func checkHeaders(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	want := map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Cache-Control":           "no-store",
		"Pragma":                  "no-cache",
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"X-Content-Type-Options":  "nosniff",
	}
	for k, v := range want {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("header %s: got %q, want %q", k, got, v)
		}
	}
	if strings.Contains(rec.Header().Get("Content-Security-Policy"), "form-action") {
		t.Error("CSP has form-action; it would block the redirect to the client")
	}
}

func checkDocument(t *testing.T, u *UI, doc document) {
	t.Helper()
	if !strings.EqualFold(doc.doctype, "DOCTYPE html") {
		t.Errorf("doctype: got %q, want DOCTYPE html", doc.doctype)
	}
	html := doc.root.all("html")
	if len(html) != 1 || html[0].attr["lang"] != "en" {
		t.Fatalf("want one <html lang=\"en\">")
	}
	if titles := doc.root.all("title"); len(titles) != 1 || titles[0].textContent() == "" {
		t.Errorf("want one non-empty <title>")
	}
	if mains := doc.root.all("main"); len(mains) != 1 {
		t.Errorf("<main>: got %d, want 1", len(mains))
	}
	if h1 := doc.root.all("h1"); len(h1) != 1 || h1[0].textContent() == "" {
		t.Errorf("want one non-empty <h1>")
	}
	var sheets []string
	for _, l := range doc.root.all("link") {
		if l.attr["rel"] == "stylesheet" {
			sheets = append(sheets, l.attr["href"])
		}
	}
	if want := []string{u.StyleURL()}; !slices.Equal(sheets, want) {
		t.Errorf("stylesheets: got %q, want %q", sheets, want)
	}
	seen := map[string]bool{}
	for _, n := range doc.root.find(func(n *node) bool { return n.has("id") }) {
		if seen[n.attr["id"]] {
			t.Errorf("duplicate id %q", n.attr["id"])
		}
		seen[n.attr["id"]] = true
	}
}

func checkNoScriptOrStyle(t *testing.T, body string, doc document) {
	t.Helper()
	if n := len(doc.root.all("script")); n != 0 {
		t.Errorf("got %d <script> elements, want none", n)
	}
	if n := len(doc.root.all("style")); n != 0 {
		t.Errorf("got %d <style> elements, want none", n)
	}
	for _, n := range doc.root.find(func(*node) bool { return true }) {
		for _, a := range n.order {
			if a == "style" || strings.HasPrefix(a, "on") {
				t.Errorf("<%s> has attribute %q", n.tag, a)
			}
		}
	}
	if strings.Contains(strings.ToLower(body), "javascript:") {
		t.Error("page contains javascript:")
	}
}

// checkLabels: every input that is not hidden or a button has an id with a
// <label for> naming it, and every label points at an element.
func checkLabels(t *testing.T, doc document) {
	t.Helper()
	labels := map[string]string{}
	for _, l := range doc.root.all("label") {
		if !l.has("for") {
			t.Errorf("<label> %q without for", l.textContent())
			continue
		}
		labels[l.attr["for"]] = l.textContent()
	}
	ids := map[string]bool{}
	for _, n := range doc.root.find(func(n *node) bool { return n.has("id") }) {
		ids[n.attr["id"]] = true
	}
	for id := range labels {
		if !ids[id] {
			t.Errorf("<label for=%q> names no element", id)
		}
	}
	for _, in := range visibleInputs(doc) {
		id := in.attr["id"]
		if id == "" {
			t.Errorf("input %q has no id", in.attr["name"])
		} else if labels[id] == "" {
			t.Errorf("input %q has no non-empty <label for=%q>", in.attr["name"], id)
		}
	}
	for _, tag := range []string{"select", "textarea"} {
		if n := len(doc.root.all(tag)); n != 0 {
			t.Errorf("unexpected <%s>; extend the checks", tag)
		}
	}
}

// inputRules are the type and autocomplete token of every visible input
// (the form rules of the package doc).
// An address is "username" where it names the account to sign in to, and
// "email" where it is an address to write to (a forgotten password, a
// registration).
var inputRules = map[string]struct {
	typ          string
	autocomplete []string
}{
	"email":        {"email", []string{"username", "email"}},
	"password":     {"password", []string{"current-password"}},
	"new_password": {"password", []string{"new-password"}},
	"phone":        {"tel", []string{"tel"}},
	"code":         {"text", []string{"one-time-code"}},
	"q":            {"search", []string{"off"}},
}

func checkAutocomplete(t *testing.T, doc document) {
	t.Helper()
	for _, in := range visibleInputs(doc) {
		name := in.attr["name"]
		rule, ok := inputRules[name]
		if !ok {
			t.Errorf("input %q has no rule; add one to inputRules", name)
			continue
		}
		if got := in.attr["type"]; got != rule.typ {
			t.Errorf("input %s type: got %q, want %q", name, got, rule.typ)
		}
		if got := in.attr["autocomplete"]; !slices.Contains(rule.autocomplete, got) {
			t.Errorf("input %s autocomplete: got %q, want one of %q", name, got, rule.autocomplete)
		}
	}
}

// checkAlerts: each aria-describedby names an element, and each
// role="alert" is named by some input.
func checkAlerts(t *testing.T, doc document) {
	t.Helper()
	described := map[string]bool{}
	for _, n := range doc.root.find(func(n *node) bool { return n.has("aria-describedby") }) {
		for _, id := range strings.Fields(n.attr["aria-describedby"]) {
			described[id] = true
			if len(doc.root.find(func(m *node) bool { return m.attr["id"] == id })) != 1 {
				t.Errorf("aria-describedby=%q names no element", id)
			}
		}
	}
	for _, a := range doc.root.find(func(n *node) bool { return n.attr["role"] == "alert" }) {
		if a.textContent() == "" {
			t.Error("empty role=alert")
		}
		if len(visibleInputs(doc)) > 0 && !described[a.attr["id"]] {
			t.Errorf("role=alert id=%q is not tied to an input by aria-describedby", a.attr["id"])
		}
	}
}

func checkForms(t *testing.T, doc document, tc pageCase) {
	t.Helper()
	var gets int
	for _, f := range doc.root.all("form") {
		hidden := map[string][]string{}
		for _, in := range f.find(func(n *node) bool { return n.tag == "input" && n.attr["type"] == "hidden" }) {
			hidden[in.attr["name"]] = append(hidden[in.attr["name"]], in.attr["value"])
		}
		switch f.attr["method"] {
		case "post":
			if tc.common == nil {
				t.Fatal("form on a page without step data")
			}
			if got := f.attr["action"]; got != tc.common.Action {
				t.Errorf("form action: got %q, want %q", got, tc.common.Action)
			}
			want := map[string][]string{"csrf_token": {tc.common.CSRFToken}, "step": {tc.common.Step}}
			// A form that sets a new password may name its account for
			// password managers: one hidden username, marked so.
			if names := f.find(func(n *node) bool {
				return n.tag == "input" && n.attr["type"] == "hidden" && n.attr["name"] == "username"
			}); len(names) > 0 {
				if len(names) != 1 || names[0].attr["autocomplete"] != "username" || len(inputsNamed(f, "new_password")) != 1 {
					t.Errorf("hidden username: want one, autocomplete=username, beside a new_password input")
				}
				delete(hidden, "username")
			}
			if len(hidden) != len(want) || !slices.Equal(hidden["csrf_token"], want["csrf_token"]) || !slices.Equal(hidden["step"], want["step"]) {
				t.Errorf("hidden inputs: got %v, want %v", hidden, want)
			}
		case "get":
			gets++
			if got, want := f.attr["action"], pathOnly(tc.common.Action); got != want {
				t.Errorf("GET form action: got %q, want %q", got, want)
			}
			if len(hidden) != 0 {
				t.Errorf("GET form has hidden inputs %v; the CSRF token must not go into a URL", hidden)
			}
			for _, b := range f.all("button") {
				if b.has("name") {
					t.Errorf("GET form button has name %q", b.attr["name"])
				}
			}
		default:
			t.Errorf("form method: got %q, want post (or get for search)", f.attr["method"])
		}
	}
	if got, want := gets, map[bool]int{false: 0, true: 1}[tc.wantGETForm]; got != want {
		t.Errorf("GET forms: got %d, want %d", got, want)
	}
	for _, b := range doc.root.all("button") {
		if b.attr["type"] != "submit" {
			t.Errorf("button %q type: got %q, want submit", b.textContent(), b.attr["type"])
		}
		if b.textContent() == "" {
			t.Errorf("button %s=%s has no text", b.attr["name"], b.attr["value"])
		}
		inForm := false
		for p := b.parent; p != nil; p = p.parent {
			inForm = inForm || p.tag == "form"
		}
		if !inForm {
			t.Errorf("button %q outside a form", b.textContent())
		}
	}
}

// ---- helpers ----

func visibleInputs(doc document) []*node {
	return doc.root.find(func(n *node) bool {
		if n.tag != "input" {
			return false
		}
		switch n.attr["type"] {
		case "hidden", "submit", "button", "reset", "image":
			return false
		}
		return true
	})
}

func visibleInputNames(doc document) []string {
	var names []string
	for _, in := range visibleInputs(doc) {
		names = append(names, in.attr["name"])
	}
	return names
}

func inputNamed(t *testing.T, doc document, name string) *node {
	t.Helper()
	ins := doc.root.find(func(n *node) bool { return n.tag == "input" && n.attr["name"] == name })
	if len(ins) != 1 {
		t.Fatalf("inputs named %q: got %d, want 1", name, len(ins))
	}
	return ins[0]
}

func inputsNamed(n *node, name string) []*node {
	return n.find(func(m *node) bool { return m.tag == "input" && m.attr["name"] == name })
}

// namedButtons lists name=value of the buttons that carry a name.
func namedButtons(doc document) []string {
	var out []string
	for _, b := range doc.root.all("button") {
		if b.has("name") {
			out = append(out, b.attr["name"]+"="+b.attr["value"])
		}
	}
	return out
}

// links lists "rel href" of every <a>.
func links(doc document) []string {
	var out []string
	for _, a := range doc.root.all("a") {
		out = append(out, a.attr["rel"]+" "+a.attr["href"])
	}
	return out
}

// golden compares body with testdata/<name>.html, or rewrites it with
// -update. The stylesheet's and the icon's hashes are replaced so that a
// change of either does not invalidate every golden file.
func golden(t *testing.T, u *UI, name, body string) {
	t.Helper()
	body = strings.ReplaceAll(body, u.StyleURL(), "/static/style.css?v=HASH")
	body = strings.ReplaceAll(body, u.iconURL, "/favicon.ico?v=HASH")
	path := filepath.Join("testdata", name+".html")
	if *update {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if body != string(want) {
		t.Errorf("%s differs from the rendered page (run go test -update after checking):\ngot:\n%s", path, body)
	}
}
