package sms

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestSenders(t *testing.T) {
	msg := Message{To: "+15551234567", Text: "Your code is 123456", Code: "123456", SentAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	var hooked []Message
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m Message
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&m) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		hooked = append(hooked, m)
	}))
	defer hook.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer failing.Close()

	dir := t.TempDir()
	outbox := filepath.Join(dir, "outbox.jsonl")
	cases := []struct {
		name      string
		sender    Sender
		wantErr   bool
		wantLines int
		wantHooks int
	}{
		{"none", New("", "", nil), false, 0, 0},
		{"outbox", New(outbox, "", nil), false, 1, 0},
		{"webhook", &Webhook{URL: hook.URL}, false, 1, 1},
		{"both", Multi{&Outbox{Path: outbox}, &Webhook{URL: hook.URL}}, false, 2, 2},
		{"webhook failing", Multi{&Outbox{Path: outbox}, &Webhook{URL: failing.URL}}, true, 3, 2},
		{"outbox unwritable", New(filepath.Join(dir, "missing", "x"), "", nil), true, 3, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sender == nil {
				if tc.name != "none" {
					t.Fatal("nil sender")
				}
				return
			}
			err := tc.sender.Send(context.Background(), msg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if n := countLines(t, outbox); n != tc.wantLines {
				t.Fatalf("outbox lines = %d, want %d", n, tc.wantLines)
			}
			if len(hooked) != tc.wantHooks {
				t.Fatalf("webhook calls = %d, want %d", len(hooked), tc.wantHooks)
			}
		})
	}
	if hooked[0] != msg {
		t.Fatalf("webhook got %+v", hooked[0])
	}
}

func countLines(t *testing.T, path string) int {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d not JSON: %v", n+1, err)
		}
		for _, k := range []string{"to", "text", "code", "sent_at"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("line %d lacks %q", n+1, k)
			}
		}
		n++
	}
	if sc.Err() != nil && sc.Err() != io.EOF {
		t.Fatal(sc.Err())
	}
	return n
}

// TestWebhookFollowsNoRedirect: a 307 or 308 from the webhook would
// re-post the code to wherever it points; the send fails instead and the
// other host is never called.
func TestWebhookFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL, status)
		}))
		err := (&Webhook{URL: hook.URL}).Send(context.Background(), Message{To: "+15550000000", Code: "123456"})
		hook.Close()
		if err == nil {
			t.Errorf("status %d: the send succeeded", status)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target was called %d times", n)
	}
}

// TestNewSendsTheWebhookInTheBackground: New's webhook send returns at
// once even when the gateway is slow, and a failure reaches onError.
func TestNewSendsTheWebhookInTheBackground(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer slow.Close()
	defer close(release)
	errs := make(chan error, 1)
	s := New("", slow.URL, func(err error) { errs <- err })
	start := time.Now()
	if err := s.Send(context.Background(), Message{To: "+15550000000", Code: "123456"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Send waited %s for the gateway", d)
	}
	release <- struct{}{}
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("nil error reported")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the failure never reached onError")
	}
}
