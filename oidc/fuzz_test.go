package oidc

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// Fuzz targets of the HTTP surface. Each builds one harness outside
// f.Fuzz and sends every input straight to its handler.
//
// Codes and tokens differ from one process to the next (random values,
// a fresh signing key), and a fuzzing worker is another process than the
// one that read the seeds. So seeds name them by a marker, replaced in
// every input by the running harness's value: mutations of a seed then
// stay mutations of a live code or token.
const (
	markPublicCode  = "seed-code-public" // a code issued to hPublic
	markConfCode    = "seed-code-conf"   // a code issued to hConfidential
	markAccessToken = "seed-access-token"
	markIDToken     = "seed-id-token"
	markNoneToken   = "seed-none-token"  // the access token re-signed with alg none
	markOtherToken  = "seed-other-token" // an access token of another organization's app
	markRespelled   = "seed-respelled"   // the access token, last character's unused bits set
)

// fuzzOversized is longer than any limit of the authorization request.
var fuzzOversized = strings.Repeat("A", 4<<10)

// FuzzAuthorizeQuery: whatever the query, GET /authorize never fails with
// a 5xx other than 503, and redirects only with 302/303, only to a
// registered redirect URI of a seeded client (or, for a signed-in
// browser, to the organization picker), carrying a code or an error.
func FuzzAuthorizeQuery(f *testing.F) {
	h := newHarness(f)
	_, secret := h.ssoSession(hUser)
	session := &http.Cookie{Name: cookieSession, Value: secret}

	var seeds []string
	for _, c := range []string{hConfidential, hPublic, hMulti, hOtherOrgApp, hSiblingApp} {
		for _, uri := range []string{hRedirect, hLoopback} {
			seeds = append(seeds, authzQuery(c, map[string]string{"redirect_uri": uri}).Encode())
		}
	}
	full := authzQuery(hMulti, map[string]string{
		"prompt": "select_account", "max_age": "3600", "acr_values": ACRPwd, "organization_hint": hOrgB,
	})
	for _, k := range slices.Sorted(maps.Keys(full)) {
		missing, oversized := maps.Clone(full), maps.Clone(full)
		missing.Del(k)
		oversized.Set(k, fuzzOversized)
		repeated := full.Encode() + "&" + k + "=" + url.QueryEscape(full.Get(k))
		seeds = append(seeds, missing.Encode(), repeated, oversized.Encode())
	}
	seeds = append(seeds, "", "%", "client_id=%zz", ";", "&&=&", "prompt=none&"+authzQuery(hPublic).Encode(),
		authzQuery(hPublic).Encode()+"&redirect_uri=https://evil.example/cb",
		strings.Replace(authzQuery(hPublic).Encode(), "app.example", "app.example%00", 1))
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}

	f.Fuzz(func(t *testing.T, rawQuery string, signedIn bool) {
		req := httptest.NewRequest(http.MethodGet, PathAuthorize, nil)
		req.URL.RawQuery = rawQuery
		if signedIn {
			req.AddCookie(session)
		}
		rec := httptest.NewRecorder()
		h.srv.Config.Handler.ServeHTTP(rec, req)

		status, loc := rec.Code, rec.Header().Get("Location")
		redirect := status == http.StatusFound || status == http.StatusSeeOther
		switch {
		case status >= 500 && status != http.StatusServiceUnavailable:
			t.Fatalf("status: got %d, want < 500 or 503", status)
		case redirect != (loc != ""):
			t.Fatalf("status %d with Location %q: want a Location exactly on 302 and 303", status, loc)
		case !redirect:
			return
		case signedIn && loc == pathPicker:
			return
		}
		query, ok := registeredQuery(loc)
		if !ok {
			t.Fatalf("Location %q: want a registered redirect URI", loc)
		}
		if q, err := url.ParseQuery(query); err != nil || q.Has("code") == q.Has("error") {
			t.Fatalf("Location %q: want either a code or an error", loc)
		}
	})
}

// registeredQuery returns the query of loc when loc is a registered
// redirect URI of the seeded clients, byte for byte, with or without one.
func registeredQuery(loc string) (string, bool) {
	for _, uri := range []string{hRedirect, hLoopback} {
		if rest, ok := strings.CutPrefix(loc, uri); ok && (rest == "" || rest[0] == '?') {
			return strings.TrimPrefix(rest, "?"), true
		}
	}
	return "", false
}

// FuzzTokenForm: whatever the body and Basic credentials, POST
// /oauth2/token answers 200 with tokens, or 400, 401 or 503 with a JSON
// error; never a panic, never a 500.
func FuzzTokenForm(f *testing.F) {
	h := newHarness(f)
	marks := strings.NewReplacer(
		markPublicCode, h.signedInCode(hPublic, hUser, hOrgA, []string{"openid", "email"}, "", bcVerifier),
		markConfCode, h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid", "email"}, "", bcVerifier),
	)

	public := bcWith(bcTokenForm(markPublicCode), "client_id", hPublic)
	conf := bcTokenForm(markConfCode)
	for _, s := range []struct {
		form       url.Values
		user, pass string // Basic when user != ""
	}{
		{form: public},
		{form: conf, user: hConfidential, pass: hSecret},
		{form: bcWith(conf, "client_id", hConfidential, "client_secret", hSecret)},
		{form: bcWith(conf, "client_secret", hSecret), user: hConfidential, pass: hSecret},
		{form: bcWith(conf, "client_id", hPublic), user: hConfidential, pass: hSecret},
		{form: conf, user: hConfidential, pass: "wrong"},
		{form: conf, user: "conf%2Dapp", pass: hSecret},
		{form: conf, user: "%zz", pass: "%zz"},
		{form: public, user: hPublic},
		{form: bcWith(public, "client_id", "nope")},
		{form: bcWith(public, "grant_type", "")},
		{form: bcWith(public, "grant_type", "refresh_token")},
		{form: bcWith(public, "code", "")},
		{form: bcWith(public, "redirect_uri", hLoopback)},
		{form: bcWith(public, "code_verifier", "short")},
		{form: bcWith(public, "code_verifier", strings.Repeat("v", 128))},
		{form: bcWith(public, "scope", "openid profile")},
		{form: bcWith(public, "code", fuzzOversized)},
	} {
		f.Add(s.form.Encode(), s.user != "", s.user, s.pass)
	}
	for _, body := range []string{"", "%", "a=1&a=2", ";", "code=%zz", public.Encode() + "&code=x", strings.Repeat("a", maxFormBody+1)} {
		f.Add(body, false, "", "")
	}

	f.Fuzz(func(t *testing.T, body string, basic bool, user, pass string) {
		body = marks.Replace(body)
		r := bcReq{method: http.MethodPost, path: PathToken, body: &body}
		if basic {
			r.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		}
		rec := bcDo(t, h, r)
		switch rec.Code {
		case http.StatusOK:
			var tok tokenResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &tok); err != nil || tok.AccessToken == "" || tok.TokenType != "bearer" {
				t.Fatalf("200 body %q: want a token response", rec.Body)
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusServiceUnavailable:
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%d body %q: want JSON with error", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("status: got %d (%s), want 200, 400, 401 or 503", rec.Code, rec.Body)
		}
	})
}

// fuzzTokens mints the harness's tokens through the code flow: an access
// and ID token of hConfidential, the access token re-signed with alg
// none, the access token spelled differently (the same bytes), and an
// access token of an app owned by another organization.
func fuzzTokens(h *harness) *strings.Replacer {
	t := h.t
	t.Helper()
	own := bcTokens(t, h, hConfidential, hSecret)
	other := bcTokens(t, h, hOtherOrgApp, hOtherSecret)
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	none := header + "." + strings.Split(own.AccessToken, ".")[1] + "."
	// An RS256 signature (256 bytes) ends in a character with 4 unused
	// bits: setting the lowest decodes to the same signature.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	n := len(own.AccessToken) - 1
	respelled := own.AccessToken[:n] + string(alphabet[strings.IndexByte(alphabet, own.AccessToken[n])^1])
	return strings.NewReplacer(markAccessToken, own.AccessToken, markIDToken, own.IDToken,
		markNoneToken, none, markOtherToken, other.AccessToken, markRespelled, respelled)
}

// FuzzBearer: GET /userinfo and /api/v1/me/memberships answer 200 to the
// seeded access tokens (of any app) presented as "Bearer <token>" (scheme
// in any case, one or more spaces) and the exact bearer 401 (invalid_token) to
// every other Authorization header.
func FuzzBearer(f *testing.F) {
	h := newHarness(f)
	marks := fuzzTokens(h)
	own, other := marks.Replace(markAccessToken), marks.Replace(markOtherToken)
	for _, s := range []string{
		"Bearer " + markAccessToken, "bearer " + markAccessToken, "BEARER   " + markAccessToken,
		"Bearer " + markAccessToken + " ", "Bearer\t" + markAccessToken, "Bearer " + markAccessToken + "x",
		"Bearer  " + markAccessToken + "," + markAccessToken, "Basic " + markAccessToken,
		"Bearer " + markIDToken, "Bearer " + markNoneToken, "Bearer " + markOtherToken, "Bearer " + markRespelled,
		"Bearer " + markAccessToken + "\n", "Bearer " + markAccessToken + "\u00a0",
		"Bearer a.b.c", "Bearer ...", "Bearer", "Bearer ", "", " ", "Bearer " + fuzzOversized,
	} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, auth string) {
		auth = marks.Replace(auth)
		valid := isBearerOf(auth, own) || isBearerOf(auth, other)
		for _, path := range []string{PathUserinfo, PathMemberships} {
			rec := bcDo(t, h, bcReq{method: http.MethodGet, path: path, auth: auth})
			switch {
			case rec.Code == http.StatusOK && valid:
			case rec.Code == http.StatusOK:
				t.Fatalf("%s: got 200 for Authorization %q, want 401", path, auth)
			case valid:
				t.Fatalf("%s: got %d for a seeded token, want 200", path, rec.Code)
			case rec.Code != http.StatusUnauthorized:
				t.Fatalf("%s: got %d (%s), want 401", path, rec.Code, rec.Body)
			default:
				checkInvalidToken(t, path, rec)
			}
		}
	})
}

// isBearerOf reports whether auth is "Bearer", in any case, one or more
// spaces, and tok (RFC 6750 2.1).
func isBearerOf(auth, tok string) bool {
	scheme, ok := strings.CutSuffix(auth, tok)
	return ok && len(scheme) > len("Bearer") && strings.EqualFold(scheme[:len("Bearer")], "Bearer") &&
		strings.Trim(scheme[len("Bearer"):], " ") == ""
}

// checkInvalidToken requires the bearer 401 to the byte: one challenge, one
// Content-Type, the fixed body.
func checkInvalidToken(t *testing.T, path string, rec *httptest.ResponseRecorder) {
	t.Helper()
	for k, want := range map[string]string{
		"WWW-Authenticate": `Bearer error="invalid_token"`,
		"Content-Type":     "application/json;charset=UTF-8",
	} {
		if got := rec.Header().Values(k); len(got) != 1 || got[0] != want {
			t.Fatalf("%s: %s: got %q, want %q", path, k, got, want)
		}
	}
	if got, want := rec.Body.String(), `{"error":"invalid_token"}`; got != want {
		t.Fatalf("%s: body: got %q, want %q", path, got, want)
	}
}

// FuzzIntrospectToken: for hConfidential, POST /oauth2/introspect answers
// 200 {"active":false} to every token value but the seeded access token
// (active) and an empty one (400: the token is missing).
func FuzzIntrospectToken(f *testing.F) {
	h := newHarness(f)
	marks := fuzzTokens(h)
	tok := marks.Replace(markAccessToken)
	for _, s := range []string{
		markAccessToken, markAccessToken + "x", " " + markAccessToken, markAccessToken + "\n",
		markIDToken, markNoneToken, markOtherToken, markRespelled, markAccessToken + "." + markAccessToken,
		"", "x", "a.b.c", "...", "e30.e30.", fuzzOversized,
	} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, token string) {
		token = marks.Replace(token)
		rec := bcDo(t, h, bcReq{method: http.MethodPost, path: PathIntrospect, user: hConfidential, pass: hSecret,
			form: url.Values{"token": {token}}})
		switch body := rec.Body.String(); {
		case token == "":
			if rec.Code != http.StatusBadRequest || !strings.Contains(body, `"error":"invalid_request"`) {
				t.Fatalf("empty token: got %d %s, want 400 invalid_request", rec.Code, body)
			}
		case token == tok:
			if rec.Code != http.StatusOK || !strings.HasPrefix(body, `{"active":true,`) {
				t.Fatalf("seeded token: got %d %s, want 200 active", rec.Code, body)
			}
		case rec.Code != http.StatusOK || body != `{"active":false}`:
			t.Fatalf("token %q: got %d %s, want 200 {\"active\":false}", token, rec.Code, body)
		}
	})
}
