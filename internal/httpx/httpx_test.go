package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestDecodeJSON(t *testing.T) {
	type body struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	cases := []struct {
		name, ct, body string
		wantStatus     int
		wantCode       string
		wantField      string
	}{
		{"ok", "application/json", `{"name":"a","n":1}`, 0, "", ""},
		{"ok no content type", "", `{"name":"a"}`, 0, "", ""},
		{"charset ok", "application/json; charset=utf-8", `{}`, 0, "", ""},
		{"wrong content type", "text/plain", `{}`, 415, CodeBadRequest, ""},
		{"empty", "application/json", ``, 400, CodeBadRequest, ""},
		{"syntax", "application/json", `{"name":`, 400, CodeBadRequest, ""},
		{"unknown field", "application/json", `{"nope":1}`, 400, CodeValidation, "nope"},
		{"wrong type", "application/json", `{"n":"x"}`, 400, CodeValidation, "n"},
		{"not an object", "application/json", `[1,2]`, 400, CodeValidation, "body"},
		{"trailing data", "application/json", `{} {}`, 400, CodeBadRequest, ""},
		{"too large", "application/json", `{"name":"` + strings.Repeat("a", MaxJSONBody) + `"}`, 413, CodeBadRequest, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
			if c.ct != "" {
				r.Header.Set("Content-Type", c.ct)
			}
			var v body
			err := DecodeJSON(httptest.NewRecorder(), r, &v)
			if c.wantStatus == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			be, ok := err.(*BodyError)
			if !ok {
				t.Fatalf("got %T %v, want *BodyError", err, err)
			}
			if be.Status != c.wantStatus || be.Code != c.wantCode {
				t.Fatalf("got %d %s, want %d %s", be.Status, be.Code, c.wantStatus, c.wantCode)
			}
			if c.wantField != "" && (len(be.Details) != 1 || be.Details[0].Field != c.wantField) {
				t.Fatalf("details: got %+v, want field %q", be.Details, c.wantField)
			}
			if strings.Contains(be.Error()+func() string { b, _ := json.Marshal(be.Details); return string(b) }(), "httpx.") {
				t.Fatalf("error leaks a Go type name: %v %+v", be, be.Details)
			}
		})
	}
}

func TestCorrelationAndEnvelope(t *testing.T) {
	h := Correlation(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, 404, CodeNotFound, "nothing here")
	}))
	cases := []struct {
		sent     string
		wantEcho bool
	}{
		{"abc-123", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"has space", false},
		{"", false},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		if c.sent != "" {
			r.Header.Set(HeaderCorrelationID, c.sent)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		got := w.Header().Get(HeaderCorrelationID)
		if (got == c.sent) != c.wantEcho || got == "" {
			t.Errorf("sent %q: got %q, echo want %v", c.sent, got, c.wantEcho)
		}
		var env Envelope
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
			t.Fatal(err)
		}
		if env.Error.CorrelationID != got || env.Error.Code != CodeNotFound || env.Error.Message == "" {
			t.Errorf("envelope: got %+v, want correlation %q", env.Error, got)
		}
		if _, err := time.Parse(time.RFC3339, env.Error.Timestamp); err != nil {
			t.Errorf("timestamp %q: %v", env.Error.Timestamp, err)
		}
	}
}

func TestRecoverAnswers500(t *testing.T) {
	h := Correlation(Recover(discard())(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 500 || !strings.Contains(w.Body.String(), CodeInternal) {
		t.Fatalf("got %d %s, want 500 %s", w.Code, w.Body, CodeInternal)
	}
}

func TestLogValue(t *testing.T) {
	long := strings.Repeat("x", 20000)
	cases := []struct{ in, want string }{
		{"", ""},
		{"client-1", "client-1"},
		{long, strings.Repeat("x", MaxLogValue) + "…(+19872 bytes)"},
	}
	for _, c := range cases {
		if got := LogValue(c.in); got != c.want {
			t.Errorf("LogValue(%d bytes): got %q, want %q", len(c.in), got, c.want)
		}
	}
}

func TestLogPath(t *testing.T) {
	token := "3q2-7wAAAAB_uJf9x0aFqZ4nJp1y8mJd0m6aV5kXo8w" // 43 base64url characters, as an emailed link's
	cases := []struct{ in, want string }{
		{"/", "/"},
		{"/password/reset/" + token, "/password/reset/…"},
		{"/invite/" + token + "/", "/invite/…/"},
		{"/admin/v1/users/0b9e2f3a-2c51-4c4e-9d3e-7f1f6e2b8a10/verify-email", "/admin/v1/users/0b9e2f3a-2c51-4c4e-9d3e-7f1f6e2b8a10/verify-email"},
		{"/x/" + strings.Repeat("a", 39), "/x/" + strings.Repeat("a", 39)},
		{"/x/" + strings.Repeat("a", 40) + ".png", "/x/" + strings.Repeat("a", 40) + ".png"}, // not base64url alone
	}
	for _, c := range cases {
		if got := LogPath(c.in); got != c.want {
			t.Errorf("LogPath(%q): got %q, want %q", c.in, got, c.want)
		}
	}
}

// TestRecoverKeepsTokensOutOfTheLog: a panic on a link's page logs its
// path without the token.
func TestRecoverKeepsTokensOutOfTheLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	token := strings.Repeat("Zm9v", 11)
	h := Recover(log)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/password/reset/"+token, nil))
	if strings.Contains(buf.String(), token) || !strings.Contains(buf.String(), "/password/reset/") {
		t.Errorf("log: %s", buf.String())
	}
}

// TestCorrelationWith: what more adds sits beside the correlation id in
// the one context the handler gets, and more sees the request.
func TestCorrelationWith(t *testing.T) {
	type key struct{}
	more := func(ctx context.Context, r *http.Request) context.Context {
		if CorrelationID(ctx) == "" {
			t.Error("more ran before the correlation id was in the context")
		}
		return context.WithValue(ctx, key{}, r.URL.Path)
	}
	var gotID, gotMore string
	h := CorrelationWith(more)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotID = CorrelationID(r.Context())
		gotMore, _ = r.Context().Value(key{}).(string)
	}))
	r := httptest.NewRequest("GET", "/p", nil)
	r.Header.Set(HeaderCorrelationID, "abc")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if gotID != "abc" || gotMore != "/p" {
		t.Fatalf("handler saw correlation id %q and %q, want abc and /p", gotID, gotMore)
	}
}

// TestGeneratedCorrelationIDs: generated ids are 32 lowercase hex digits,
// never repeat, and do not count up: two in a row share no prefix a
// reader could take for a request counter.
func TestGeneratedCorrelationIDs(t *testing.T) {
	const n = 20000
	seen := make(map[string]bool, n)
	prev := ""
	sharedPrefix := 0
	for i := 0; i < n; i++ {
		id := newCorrelationID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q: want 32 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q generated twice", id)
		}
		seen[id] = true
		if prev != "" && id[:8] == prev[:8] {
			sharedPrefix++
		}
		prev = id
	}
	if sharedPrefix > 2 {
		t.Fatalf("%d of %d consecutive ids share their first 8 digits: they look counted, not encrypted", sharedPrefix, n)
	}
	rec := httptest.NewRecorder()
	Correlation(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Header().Get(HeaderCorrelationID); len(got) != 32 {
		t.Fatalf("response X-Correlation-ID %q: want a generated id", got)
	}
}
