package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestParseLimit(t *testing.T) {
	for _, c := range []struct {
		spec string
		ok   bool
		want Limit
	}{
		{"20/60s", true, Limit{20, time.Minute}},
		{" 600/1m ", true, Limit{600, time.Minute}},
		{"1/1h30m", true, Limit{1, 90 * time.Minute}},
		{"off", false, Limit{}},
		{"", false, Limit{}},
		{"20", false, Limit{}},
		{"0/60s", false, Limit{}},
		{"-5/60s", false, Limit{}},
		{"20/60", false, Limit{}},
		{"20/0s", false, Limit{}},
		{"20/-1s", false, Limit{}},
		{"2.5/60s", false, Limit{}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			got, err := ParseLimit(c.spec)
			if (err == nil) != c.ok {
				t.Fatalf("error: got %v, want ok %v", err, c.ok)
			}
			if got != c.want {
				t.Errorf("got %v, want %v", got, c.want)
			}
			if c.ok {
				if back, err := ParseLimit(got.String()); err != nil || back != got {
					t.Errorf("String %q reads back as %v, %v", got.String(), back, err)
				}
			}
		})
	}
}

// TestWindowOwnLimit walks one Window (default 5/60s) through requests
// under a key and under Own of that key with a limit of 20/60s.
func TestWindowOwnLimit(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewWindow(5, time.Minute, 100, clock.Now)
	const key = "token\x00192.0.2.1\x00app"
	own := Own(key, Limit{20, time.Minute})
	other := Own("token\x00192.0.2.2\x00app", Limit{2, 10 * time.Second})
	steps := []struct {
		name    string
		advance time.Duration
		key     string
		times   int // requests made
		ok      bool
		retry   time.Duration // of the last
	}{
		{"own: 20 go through, 15 over the default", 0, own, 20, true, 0},
		{"own: the 21st is refused by its own limit", time.Second, own, 1, false, 59 * time.Second},
		{"key: own did not count against it", 0, key, 5, true, 0},
		{"key: the 6th is refused", 10 * time.Second, key, 1, false, 50 * time.Second},
		{"another own key, its own limit and window", 0, other, 2, true, 0},
		{"another own key, refused by its own window", 0, other, 1, false, 10 * time.Second},
		{"another own key, its window passed", 10 * time.Second, other, 1, true, 0},
		{"own: free again, but key is full: refused with key's retry", 39 * time.Second, own, 1, false, time.Second},
		{"own: key's window passed", time.Second, own, 20, true, 0},
		{"own: its own limit again", 0, own, 1, false, time.Minute},
	}
	for _, s := range steps {
		clock.Add(s.advance)
		var ok bool
		var retry time.Duration
		for i := 0; i < s.times; i++ {
			var err error
			if ok, retry, err = l.Allow(context.Background(), s.key); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if i < s.times-1 && !ok {
				t.Fatalf("%s: request %d of %d refused", s.name, i+1, s.times)
			}
		}
		if ok != s.ok || retry != s.retry {
			t.Errorf("%s: got %v %v, want %v %v", s.name, ok, retry, s.ok, s.retry)
		}
	}
}

func TestWindowRefusesMalformedOwnKey(t *testing.T) {
	l := NewWindow(5, time.Minute, 100, time.Now)
	for _, key := range []string{ownTag + "token", ownTag + "x/60s\x00token", ownTag + "off\x00token"} {
		if ok, _, err := l.Allow(context.Background(), key); ok || err == nil {
			t.Errorf("%q: got %v %v, want an error", key, ok, err)
		}
	}
}

// TestWindowBoundsRequestTimes: keys of Own with a high limit cannot make
// a Window hold more than maxKeys*entriesPerKey request times.
func TestWindowBoundsRequestTimes(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewWindow(5, time.Minute, 10, clock.Now)
	for k := 0; k < 20; k++ {
		key := Own(fmt.Sprint("k", k), Limit{1000, time.Hour})
		for i := 0; i < 100; i++ {
			if ok, _, err := l.Allow(context.Background(), key); !ok || err != nil {
				t.Fatalf("key %d, request %d: got %v %v", k, i, ok, err)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	held := 0
	for e := l.lru.Front(); e != nil; e = e.Next() {
		held += len(e.Value.(*window).times)
	}
	if held != l.entries {
		t.Errorf("entries: counted %d, held %d", l.entries, held)
	}
	if max := 10 * entriesPerKey; held > max {
		t.Errorf("request times held: got %d, want at most %d", held, max)
	}
}
