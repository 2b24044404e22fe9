package oidc

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// Helpers of the back-channel tests (token, userinfo, introspection,
// revocation, memberships). Names carry a bc prefix so they cannot clash
// with the browser-side tests of the same package.

// bcVerifier is a valid PKCE verifier (RFC 7636: 43 to 128 characters).
const bcVerifier = "bc-verifier-0123456789-abcdefghijklmnopqrstuvwxyz"

// bcReq is one request to the provider's handler.
type bcReq struct {
	method, path string
	form         url.Values // encoded as the body, Content-Type form
	body         *string    // raw body instead of form
	contentType  string     // overrides the form Content-Type
	user, pass   string     // HTTP Basic when user != "" (sent as given)
	bearer       string     // Authorization: Bearer
	auth         string     // raw Authorization header
	header       map[string]string
	remote       string // RemoteAddr; default 192.0.2.1:1234
}

// bcDo serves r through the harness's handler with a recorder.
func bcDo(t testing.TB, h *harness, r bcReq) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	switch {
	case r.body != nil:
		body = strings.NewReader(*r.body)
	case r.form != nil:
		body = strings.NewReader(r.form.Encode())
	}
	req := httptest.NewRequest(r.method, r.path, body)
	if r.body != nil || r.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.user != "" {
		req.SetBasicAuth(r.user, r.pass)
	}
	if r.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.remote != "" {
		req.RemoteAddr = r.remote
	}
	rec := httptest.NewRecorder()
	h.srv.Config.Handler.ServeHTTP(rec, req)
	return rec
}

// bcTokenForm is a valid token request body for code.
func bcTokenForm(code string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {hRedirect}, "code_verifier": {bcVerifier}}
}

// bcWith returns a copy of form with changes applied ("" deletes).
func bcWith(form url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = append([]string(nil), v...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			out.Del(kv[i])
		} else {
			out.Set(kv[i], kv[i+1])
		}
	}
	return out
}

// bcExchange redeems code for the confidential app (Basic) or, for a
// public client, with client_id in the form.
func bcExchange(t testing.TB, h *harness, clientID, secret, code string) *httptest.ResponseRecorder {
	t.Helper()
	form := bcTokenForm(code)
	r := bcReq{method: "POST", path: PathToken, form: form}
	if secret != "" {
		r.user, r.pass = clientID, secret
	} else {
		form.Set("client_id", clientID)
	}
	return bcDo(t, h, r)
}

// bcTokens signs in hUser to org A through clientID and exchanges the
// code, failing the test unless it works.
func bcTokens(t testing.TB, h *harness, clientID, secret string, scopes ...string) tokenResponse {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{"openid", "email"}
	}
	code := h.signedInCode(clientID, hUser, hOrgA, scopes, "nonce-0123456789", bcVerifier)
	rec := bcExchange(t, h, clientID, secret, code)
	if rec.Code != http.StatusOK {
		t.Fatalf("token: got %d %s, want 200", rec.Code, rec.Body)
	}
	var out tokenResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// bcIntrospect asks about token as clientID.
func bcIntrospect(t testing.TB, h *harness, clientID, secret, token string) map[string]any {
	t.Helper()
	rec := bcDo(t, h, bcReq{method: "POST", path: PathIntrospect, user: clientID, pass: secret, form: url.Values{"token": {token}}})
	if rec.Code != http.StatusOK {
		t.Fatalf("introspect: got %d %s, want 200", rec.Code, rec.Body)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// bcUserinfoStatus is the status of GET /userinfo with token.
func bcUserinfoStatus(t testing.TB, h *harness, token string) int {
	t.Helper()
	return bcDo(t, h, bcReq{method: "GET", path: PathUserinfo, bearer: token}).Code
}

// bcClaims decodes the payload of a compact JWT into raw claims.
func bcClaims(t testing.TB, token string) map[string]json.RawMessage {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("got %d parts, want 3", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// bcHeader decodes the protected header of a compact JWT.
func bcHeader(t testing.TB, token string) map[string]string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// bcKeys returns the sorted keys of a JSON object.
func bcKeys[V any](m map[string]V) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// bcOAuthError checks an {"error","error_description"} answer.
func bcOAuthError(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status: got %d, want %d (%s)", rec.Code, status, rec.Body)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "Pragma": "no-cache"} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if got := body["error"]; got != code {
		t.Errorf("error: got %q, want %q", got, code)
	}
	for k, v := range body {
		if k != "error" && k != "error_description" {
			t.Errorf("unexpected member %q", k)
		}
		if _, ok := v.(string); !ok {
			t.Errorf("%s: got %T, want string", k, v)
		}
	}
}

// bcEnvelope checks the JSON error envelope (ErrorResponse) and returns
// its details.
func bcEnvelope(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) []map[string]string {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status: got %d, want %d (%s)", rec.Code, status, rec.Body)
	}
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want %q", got, "application/json")
	}
	var env struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("envelope %q: %v", rec.Body, err)
	}
	var got struct {
		Code          string              `json:"code"`
		Message       string              `json:"message"`
		CorrelationID string              `json:"correlation_id"`
		Timestamp     string              `json:"timestamp"`
		Details       []map[string]string `json:"details"`
	}
	raw, _ := json.Marshal(env.Error)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Code != code {
		t.Errorf("code: got %q, want %q", got.Code, code)
	}
	if got.Message == "" || got.CorrelationID == "" {
		t.Errorf("message %q, correlation_id %q: want both", got.Message, got.CorrelationID)
	}
	if got.CorrelationID != rec.Header().Get("X-Correlation-ID") {
		t.Errorf("correlation_id: got %q, want the header's %q", got.CorrelationID, rec.Header().Get("X-Correlation-ID"))
	}
	if _, err := time.Parse(time.RFC3339, got.Timestamp); err != nil {
		t.Errorf("timestamp %q: %v", got.Timestamp, err)
	}
	for k := range env.Error {
		switch k {
		case "code", "message", "correlation_id", "timestamp", "details":
		default:
			t.Errorf("unexpected member error.%s", k)
		}
	}
	return got.Details
}

// bcInvalidToken checks the bearer 401 (invalid_token).
func bcInvalidToken(t *testing.T, rec *httptest.ResponseRecorder, withBody bool) {
	t.Helper()
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status: got %d, want 401 (%s)", rec.Code, rec.Body)
	}
	for k, want := range map[string]string{
		"WWW-Authenticate": `Bearer error="invalid_token"`,
		"Content-Type":     "application/json;charset=UTF-8",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	want := `{"error":"invalid_token"}`
	if !withBody {
		want = ""
	}
	if got := rec.Body.String(); got != want {
		t.Errorf("body: got %q, want %q", got, want)
	}
}

// bcSetClient rewrites a client registration.
func bcSetClient(t testing.TB, h *harness, id string, change func(*fsm.Client)) {
	t.Helper()
	c, err := h.applier.State().Client(id)
	if err != nil {
		t.Fatal(err)
	}
	change(&c)
	bcApply(t, h, fsm.TypeUpdateClient, fsm.PutClient{Client: c})
}

// bcApply applies a command, failing t unless it succeeds.
func bcApply(t testing.TB, h *harness, typ fsm.Type, v any) fsm.Result {
	t.Helper()
	res, err := h.applier.Apply(context.Background(), fsm.MustCommand(typ, v))
	if err != nil || res.Err != nil {
		t.Fatalf("%s: %v %v", typ, err, res.Err)
	}
	return res
}

// bcSecondCode issues another code on the SSO session of an earlier code,
// so it joins the same app session (same sid).
func bcSecondCode(t testing.TB, h *harness, firstCode string) string {
	t.Helper()
	first := h.issuedCode(firstCode)
	now := h.clock.Now()
	code := authn.NewID()
	c := first
	c.Hash, c.IssuedAt, c.ExpiresAt, c.RequestedAt = authn.HashToken(code), now, now.Add(60*time.Second), now
	c.RedeemedAt, c.AccessJTI, c.AccessExpires, c.SID = time.Time{}, "", time.Time{}, ""
	bcApply(t, h, fsm.TypeIssueCode, fsm.IssueCode{NewSID: authn.NewID(), IdleExpiresAt: now.Add(2 * time.Hour), Code: c})
	return code
}
