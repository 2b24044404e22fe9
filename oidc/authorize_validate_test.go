package oidc

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// fakeClients is a clientSource over a map; the id "broken" fails like an
// unreadable store.
type fakeClients map[string]fsm.Client

func (f fakeClients) Client(id string) (fsm.Client, error) {
	if id == "broken" {
		return fsm.Client{}, errors.New("disk on fire")
	}
	c, ok := f[id]
	if !ok {
		return fsm.Client{}, fsm.ErrNotFound
	}
	return c, nil
}

var testClient = fsm.Client{
	ID: "app", Scopes: []string{"openid", "email"},
	RedirectURIs: []string{"https://app.example/cb", "https://app.example/cb?x=1", "http://127.0.0.1:9999/cb"},
}

func TestLookupClient(t *testing.T) {
	clients := fakeClients{"app": testClient, "off": {ID: "off", Suspended: true}}
	for _, tc := range []struct {
		id, wantErr string
		store       bool
	}{
		{id: "app"},
		{id: "", wantErr: "client_id missing"},
		{id: "nope", wantErr: `client_id "nope" unknown`},
		{id: "off", wantErr: `client "off" suspended`},
		{id: "broken", wantErr: "store unavailable", store: true},
	} {
		t.Run(tc.id, func(t *testing.T) {
			c, err := lookupClient(clients, tc.id)
			if got := errText(err); !strings.Contains(got, tc.wantErr) || (tc.wantErr == "") != (err == nil) {
				t.Fatalf("got %q, want %q", got, tc.wantErr)
			}
			if got := errors.Is(err, errAuthzStore); got != tc.store {
				t.Errorf("store error: got %v, want %v", got, tc.store)
			}
			if err == nil && c.ID != tc.id {
				t.Errorf("got client %q, want %q", c.ID, tc.id)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkErr compares an error with an expectation: "" means no error,
// otherwise a substring of the message.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("got %q, want no error", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %q, want an error containing %q", errText(err), want)
	}
}

func TestCheckRedirectURI(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"https://app.example/cb", ""},
		{"https://app.example/cb?x=1", ""},
		{"http://127.0.0.1:9999/cb", ""},
		{"", "missing"},
		{"https://app.example/cb?foo=bar", "not registered"},
		{"https://app.example/cb?x=1&foo=bar", "not registered"},
		{"https://app.example/cb/", "not registered"},
		{"https://app.example/cb#x", "not registered"},
		{"http://app.example/cb", "not registered"},
		{"https://APP.example/cb", "not registered"},
		{"https://app.example:443/cb", "not registered"},
		{"https://app.example.evil/cb", "not registered"},
		{"https://evil.example/cb", "not registered"},
		{"https://app.example/CB", "not registered"},
		{"https://app.example/cb/../cb", "not registered"},
		{"https://app.example/%63b", "not registered"},
		{"http://127.0.0.1:9998/cb", "not registered"},
		{"http://localhost:9999/cb", "not registered"},
		{" https://app.example/cb", "not registered"},
		{"//app.example/cb", "not registered"},
	} {
		t.Run(tc.uri, func(t *testing.T) { checkErr(t, checkRedirectURI(testClient, tc.uri), tc.want) })
	}
}

func TestCheckResponseType(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"code", ""}, {"", "not code"}, {"token", "not code"}, {"code id_token", "not code"}, {"CODE", "not code"},
	} {
		t.Run(tc.v, func(t *testing.T) { checkErr(t, checkResponseType(tc.v), tc.want) })
	}
}

func TestCheckPKCE(t *testing.T) {
	good := authn.S256("some verifier")
	for _, tc := range []struct{ name, challenge, method, want string }{
		{"ok", good, "S256", ""},
		{"no challenge", "", "S256", "code_challenge missing"},
		{"no method", good, "", "not S256"},
		{"plain", good, "plain", "not S256"},
		{"lower s256", good, "s256", "not S256"},
		{"short", good[:42], "S256", "42 characters"},
		{"long", good + "A", "S256", "44 characters"},
		{"padding", good[:42] + "=", "S256", "not base64url"},
		{"std alphabet", strings.Repeat("+", 43), "S256", "not base64url"},
		{"space", good[:42] + " ", "S256", "not base64url"},
		{"non-canonical last char", good[:42] + "B", "S256", "not base64url"},
		{"min length 1 is not enough", "x", "S256", "1 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkErr(t, checkPKCE(tc.challenge, tc.method), tc.want) })
	}
}

func TestCheckScope(t *testing.T) {
	for _, tc := range []struct {
		scope string
		want  []string
		err   string
	}{
		{scope: "openid", want: []string{"openid"}},
		{scope: "openid email", want: []string{"openid", "email"}},
		{scope: "email openid", want: []string{"email", "openid"}},
		{scope: "openid openid", want: []string{"openid"}},
		{scope: "email", want: []string{"email"}},
		{scope: "openid  email ", want: []string{"openid", "email"}},
		{scope: "", err: "missing or empty"},
		{scope: " ", err: "missing or empty"},
		{scope: "openid profile", err: `"profile" not registered`},
		{scope: "openid offline_access", err: `"offline_access" unknown`},
		{scope: "OPENID", err: "unknown"},
		{scope: "openid\temail", err: "unknown"},
	} {
		t.Run(tc.scope, func(t *testing.T) {
			got, err := checkScope(testClient, tc.scope)
			checkErr(t, err, tc.err)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckStateAndNonce(t *testing.T) {
	for _, tc := range []struct {
		name, v string
		want    string
	}{
		{"8 bytes", "12345678", ""},
		{"1024 bytes", strings.Repeat("s", 1024), ""},
		{"7 bytes", "1234567", "7 bytes"},
		{"empty", "", "0 bytes"},
		{"too long", strings.Repeat("s", 1025), "at most 1024"},
		{"multibyte counts bytes", "ééé", "6 bytes"},
	} {
		t.Run("state "+tc.name, func(t *testing.T) { checkErr(t, checkState(tc.v), tc.want) })
	}
	for _, tc := range []struct {
		name, v string
		present bool
		want    string
	}{
		{"absent", "", false, ""},
		{"8 bytes", "12345678", true, ""},
		{"512 bytes", strings.Repeat("n", 512), true, ""},
		{"empty", "", true, "0 bytes"},
		{"7 bytes", "1234567", true, "7 bytes"},
		{"513 bytes", strings.Repeat("n", 513), true, "513 bytes"},
	} {
		t.Run("nonce "+tc.name, func(t *testing.T) { checkErr(t, checkNonce(tc.v, tc.present), tc.want) })
	}
}

func TestParsePrompt(t *testing.T) {
	for _, tc := range []struct {
		v       string
		present bool
		want    prompts
		err     string
	}{
		{"", false, 0, ""},
		{"none", true, promptNone, ""},
		{"login", true, promptLogin, ""},
		{"select_account", true, promptSelectAccount, ""},
		{"login select_account", true, promptLogin | promptSelectAccount, ""},
		{"select_account login", true, promptLogin | promptSelectAccount, ""},
		{"", true, 0, `value "" invalid`},
		{"none login", true, 0, "none combined"},
		{"login none", true, 0, "none combined"},
		{"login login", true, 0, "repeated"},
		{"none none", true, 0, "repeated"},
		{"consent", true, 0, `"consent" invalid`},
		{"login  select_account", true, 0, `value "" invalid`},
		{" login", true, 0, `value "" invalid`},
		{"login ", true, 0, `value "" invalid`},
		{"LOGIN", true, 0, "invalid"},
		{"login\tnone", true, 0, "invalid"},
	} {
		t.Run(fmt.Sprintf("%q", tc.v), func(t *testing.T) {
			got, err := parsePrompt(tc.v, tc.present)
			checkErr(t, err, tc.err)
			if got != tc.want {
				t.Errorf("got %b, want %b", got, tc.want)
			}
		})
	}
}

func TestParseMaxAge(t *testing.T) {
	for _, tc := range []struct {
		v       string
		present bool
		want    int64 // -1: nil
		err     string
	}{
		{"", false, -1, ""},
		{"0", true, 0, ""},
		{"3600", true, 3600, ""},
		{"007", true, 7, ""},
		{"9223372036854775807", true, 9223372036854775807, ""},
		{"9223372036854775808", true, -1, "out of range"},
		{"", true, -1, "not a non-negative integer"},
		{"-1", true, -1, "not a non-negative integer"},
		{"+1", true, -1, "not a non-negative integer"},
		{"1.5", true, -1, "not a non-negative integer"},
		{"1e3", true, -1, "not a non-negative integer"},
		{" 1", true, -1, "not a non-negative integer"},
		{"abc", true, -1, "not a non-negative integer"},
	} {
		t.Run(fmt.Sprintf("%q", tc.v), func(t *testing.T) {
			got, err := parseMaxAge(tc.v, tc.present)
			checkErr(t, err, tc.err)
			switch {
			case tc.want < 0 && got != nil:
				t.Errorf("got %d, want none", *got)
			case tc.want >= 0 && (got == nil || *got != tc.want):
				t.Errorf("got %v, want %d", got, tc.want)
			}
		})
	}
}

func TestParseACRValues(t *testing.T) {
	for _, tc := range []struct {
		name, v string
		present bool
		want    []string
		err     string
	}{
		{"absent", "", false, nil, ""},
		{"one", ACRPwd, true, []string{ACRPwd}, ""},
		{"two", ACRMFA + " " + ACRPwd, true, []string{ACRMFA, ACRPwd}, ""},
		{"repeat collapses", ACRPwd + " " + ACRPwd, true, []string{ACRPwd}, ""},
		{"unsupported is well-formed", "urn:x", true, []string{"urn:x"}, ""},
		{"512 bytes", strings.Repeat("a", 512), true, []string{strings.Repeat("a", 512)}, ""},
		{"513 bytes", strings.Repeat("a", 513), true, nil, "513 bytes"},
		{"empty", "", true, nil, "empty value"},
		{"double space", ACRPwd + "  " + ACRMFA, true, nil, "empty value"},
		{"leading space", " " + ACRPwd, true, nil, "empty value"},
		{"trailing space", ACRPwd + " ", true, nil, "empty value"},
		{"tab", ACRPwd + "\t" + ACRMFA, true, nil, "visible ASCII"},
		{"control", "urn:\x01", true, nil, "visible ASCII"},
		{"non-ascii", "urn:é", true, nil, "visible ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseACRValues(tc.v, tc.present)
			checkErr(t, err, tc.err)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckACRSupported(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string // description, "" for none
	}{
		{nil, ""},
		{[]string{ACRPwd, ACRMFA, ACRPhone}, ""},
		{[]string{"urn:x"}, "unsupported acr value: urn:x"},
		{[]string{ACRPwd, "urn:service:sso:acr:MFA"}, "unsupported acr value: urn:service:sso:acr:MFA"},
	} {
		t.Run(strings.Join(tc.values, " "), func(t *testing.T) {
			e := checkACRSupported(tc.values)
			got := ""
			if e != nil {
				got = e.Description
				if e.Code != "invalid_request" {
					t.Errorf("code: got %q, want %q", e.Code, "invalid_request")
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequiredACR(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{ACRMFA}, ACRMFA},
		{[]string{ACRMFA, ACRPwd}, ACRPwd},
		{[]string{ACRPhone, ACRMFA}, ACRPhone},
	} {
		t.Run(strings.Join(tc.values, " "), func(t *testing.T) {
			if got := requiredACR(tc.values); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseOrgHint(t *testing.T) {
	for _, tc := range []struct {
		v       string
		present bool
		want    string
		err     string
	}{
		{"", false, "", ""},
		{hOrgB, true, hOrgB, ""},
		{strings.ToUpper(hOrgB), true, hOrgB, ""},
		{"", true, "", "not a UUID"},
		{"beta", true, "", "not a UUID"},
		{strings.ReplaceAll(hOrgB, "-", ""), true, "", "not a UUID"},
		{"{" + hOrgB + "}", true, "", "not a UUID"},
		{"urn:uuid:" + hOrgB, true, "", "not a UUID"},
		{hOrgB[:35] + "g", true, "", "not a UUID"},
		{hOrgB[:8] + "_" + hOrgB[9:], true, "", "not a UUID"},
	} {
		t.Run(fmt.Sprintf("%q", tc.v), func(t *testing.T) {
			got, err := parseOrgHint(tc.v, tc.present)
			checkErr(t, err, tc.err)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateAuthorizeOrder(t *testing.T) {
	clients := fakeClients{"app": testClient}
	base := url.Values{
		"client_id": {"app"}, "redirect_uri": {"https://app.example/cb"}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"12345678"}, "code_challenge": {authn.S256("v")}, "code_challenge_method": {"S256"},
	}
	with := func(kv ...string) url.Values {
		q := url.Values{}
		for k, v := range base {
			q[k] = slices.Clone(v)
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "<del>" {
				q.Del(kv[i])
			} else {
				q.Set(kv[i], kv[i+1])
			}
		}
		return q
	}
	twice := with()
	twice.Add("state", "abcdefgh")
	for _, tc := range []struct {
		name string
		q    url.Values
		want string
	}{
		{"valid", with(), ""},
		{"repeat first", twice, `"state" repeated`},
		// The first failing check wins, in the fixed order.
		{"client before redirect", with("client_id", "nope", "redirect_uri", "https://evil/"), "unknown"},
		{"redirect before the rest", with("redirect_uri", "https://evil/", "response_type", "token"), "not registered"},
		{"response_type before pkce", with("response_type", "token", "code_challenge", "<del>"), "not code"},
		{"pkce before scope", with("code_challenge", "<del>", "scope", "<del>"), "code_challenge missing"},
		{"scope before state", with("scope", "<del>", "state", "<del>"), "scope missing"},
		{"state before nonce", with("state", "short", "nonce", "x"), "5 bytes"},
		{"nonce before prompt", with("nonce", "x", "prompt", "bogus"), "nonce"},
		{"prompt before max_age", with("prompt", "bogus", "max_age", "-1"), "prompt"},
		{"max_age before acr", with("max_age", "-1", "acr_values", ""), "max_age"},
		{"acr before hint", with("acr_values", "", "organization_hint", "x"), "acr_values"},
		{"hint", with("organization_hint", "x"), "organization_hint"},
		{"unsupported acr is not a page error", with("acr_values", "urn:x"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _, err := validateAuthorize(clients, tc.q)
			checkErr(t, err, tc.want)
			if err == nil && (req.ClientID != "app" || req.State != tc.q.Get("state") || len(req.Scopes) == 0) {
				t.Errorf("request not filled in: %+v", req)
			}
		})
	}
}

func TestNeedsFreshAuth(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := fsm.SSOSession{AuthTime: now.Add(-100 * time.Second)}
	age := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name string
		req  authzRequest
		want bool
	}{
		{"no constraint", authzRequest{}, false},
		{"prompt login", authzRequest{Prompt: promptLogin}, true},
		{"prompt select_account", authzRequest{Prompt: promptSelectAccount}, false},
		{"max_age 0", authzRequest{MaxAge: age(0)}, true},
		{"max_age 99", authzRequest{MaxAge: age(99)}, true},
		{"max_age 100", authzRequest{MaxAge: age(100)}, false},
		{"max_age huge", authzRequest{MaxAge: age(1 << 62)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsFreshAuth(tc.req, s, now); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParsePickerQuery(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want pickerQuery
		err  string
	}{
		{"", pickerQuery{}, ""},
		{"q=be", pickerQuery{Q: "be"}, ""},
		{"q=" + strings.Repeat("x", 64), pickerQuery{Q: strings.Repeat("x", 64)}, ""},
		{"after=" + hOrgA, pickerQuery{After: hOrgA}, ""},
		{"before=" + strings.ToUpper(hOrgA), pickerQuery{Before: hOrgA}, ""},
		{"q=a&after=" + hOrgA + "&other=1", pickerQuery{Q: "a", After: hOrgA}, ""},
		{"q=" + strings.Repeat("x", 65), pickerQuery{}, "at most 64"},
		{"after=x", pickerQuery{}, "not a UUID"},
		{"before=", pickerQuery{}, "not a UUID"},
		{"after=" + hOrgA + "&before=" + hOrgB, pickerQuery{}, "both"},
		{"q=a&q=b", pickerQuery{}, "repeated"},
		{"q=%zz", pickerQuery{}, "invalid URL escape"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			got, err := parsePickerQuery(tc.raw)
			checkErr(t, err, tc.err)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPickerPage(t *testing.T) {
	// 25 organizations named "Org 00".."Org 24"; odd ones also match "odd".
	var orgs []fsm.Org
	for i := range 25 {
		slug := fmt.Sprintf("even-%02d", i)
		if i%2 == 1 {
			slug = fmt.Sprintf("odd-%02d", i)
		}
		orgs = append(orgs, fsm.Org{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", 24-i), Name: fmt.Sprintf("Org %02d", i), Slug: slug})
	}
	sortOrgs(orgs)
	id := func(i int) string { return orgs[i].ID }
	names := func(page []fsm.Org) string {
		var s []string
		for _, o := range page {
			s = append(s, strings.TrimPrefix(o.Name, "Org "))
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name       string
		pq         pickerQuery
		want       string
		prev, next string
	}{
		{"first", pickerQuery{}, "00,01,02,03,04,05,06,07,08,09", "", id(9)},
		{"second", pickerQuery{After: id(9)}, "10,11,12,13,14,15,16,17,18,19", id(10), id(19)},
		{"last", pickerQuery{After: id(19)}, "20,21,22,23,24", id(20), ""},
		{"back from last", pickerQuery{Before: id(20)}, "10,11,12,13,14,15,16,17,18,19", id(10), id(19)},
		{"back to first", pickerQuery{Before: id(10)}, "00,01,02,03,04,05,06,07,08,09", "", id(9)},
		{"back short", pickerQuery{Before: id(3)}, "00,01,02", "", id(2)},
		{"unknown cursor", pickerQuery{After: hOrgA}, "00,01,02,03,04,05,06,07,08,09", "", id(9)},
		{"search", pickerQuery{Q: "ODD"}, "01,03,05,07,09,11,13,15,17,19", "", id(19)},
		{"search next", pickerQuery{Q: "odd", After: id(19)}, "21,23", id(21), ""},
		{"search cursor not matching", pickerQuery{Q: "odd", After: id(20)}, "21,23", id(21), ""},
		{"search by name", pickerQuery{Q: "org 2"}, "20,21,22,23,24", "", ""},
		{"no match", pickerQuery{Q: "zzz"}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, prev, next := pickerPage(orgs, tc.pq, 10)
			if got := names(page); got != tc.want {
				t.Errorf("page: got %q, want %q", got, tc.want)
			}
			if prev != tc.prev {
				t.Errorf("prev: got %q, want %q", prev, tc.prev)
			}
			if next != tc.next {
				t.Errorf("next: got %q, want %q", next, tc.next)
			}
		})
	}
}

func TestSortOrgs(t *testing.T) {
	orgs := []fsm.Org{{ID: "3", Name: "beta"}, {ID: "2", Name: "Alpha"}, {ID: "1", Name: "alpha"}, {ID: "0", Name: "Gamma"}}
	sortOrgs(orgs)
	var got []string
	for _, o := range orgs {
		got = append(got, o.ID)
	}
	if want := []string{"1", "2", "3", "0"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestHints(t *testing.T) {
	for in, want := range map[string]string{"corp": "corp", "corp-2": "corp-2", "Corp": "", "a/b": "", "": "",
		strings.Repeat("a", 41): "", strings.Repeat("a", 40): strings.Repeat("a", 40)} {
		if got := idpHint(in); got != want {
			t.Errorf("idpHint(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"alice@corp.example": "alice@corp.example", " alice ": "alice", "a\nb": "",
		strings.Repeat("a", 255): ""} {
		if got := loginHint(in); got != want {
			t.Errorf("loginHint(%q) = %q, want %q", in, got, want)
		}
	}
}
