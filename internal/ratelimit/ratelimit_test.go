package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestParse(t *testing.T) {
	for _, c := range []struct {
		spec   string
		ok     bool
		limit  int
		window time.Duration
	}{
		{"5/60s", true, 5, time.Minute},
		{"100/1m", true, 100, time.Minute},
		{"1/1h30m", true, 1, 90 * time.Minute},
		{" 5/60s ", true, 5, time.Minute},
		{"off", true, 0, 0},
		{"", false, 0, 0},
		{"5", false, 0, 0},
		{"5/", false, 0, 0},
		{"/60s", false, 0, 0},
		{"0/60s", false, 0, 0},
		{"-1/60s", false, 0, 0},
		{"x/60s", false, 0, 0},
		{"5/60", false, 0, 0},
		{"5/0s", false, 0, 0},
		{"5/-1s", false, 0, 0},
		{"OFF", false, 0, 0},
	} {
		t.Run(c.spec, func(t *testing.T) {
			w, err := Parse(c.spec, time.Now)
			if (err == nil) != c.ok {
				t.Fatalf("error: got %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if c.limit == 0 {
				if w != nil {
					t.Errorf("off: got a limiter, want none")
				}
				return
			}
			if w.limit != c.limit || w.window != c.window {
				t.Errorf("got %d/%v, want %d/%v", w.limit, w.window, c.limit, c.window)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewWindow(5, time.Minute, 100, clock.Now)
	ctx := context.Background()
	allow := func(key string) (bool, time.Duration) {
		ok, retry, err := l.Allow(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok, retry
	}
	steps := []struct {
		advance time.Duration
		key     string
		ok      bool
		retry   time.Duration
	}{
		{0, "a", true, 0},
		{10 * time.Second, "a", true, 0},
		{10 * time.Second, "a", true, 0},
		{10 * time.Second, "a", true, 0},
		{10 * time.Second, "a", true, 0},                 // t=40s: five in the window
		{10 * time.Second, "a", false, 10 * time.Second}, // t=50s: the first leaves at 60s
		{0, "b", true, 0},                                // another key is unaffected
		{10 * time.Second, "a", true, 0},                 // t=60s: the first left
		{0, "a", false, 10 * time.Second},                // t=60s: the second leaves at 70s
		{9 * time.Second, "a", false, time.Second},       // t=69s
		{time.Second, "a", true, 0},                      // t=70s
		{2 * time.Minute, "a", true, 0},                  // all gone: a fresh window
	}
	for i, s := range steps {
		clock.Add(s.advance)
		ok, retry := allow(s.key)
		if ok != s.ok || retry != s.retry {
			t.Errorf("step %d (%s): got %v %v, want %v %v", i, s.key, ok, retry, s.ok, s.retry)
		}
	}
	// A sliding window never lets more than five through in any minute,
	// unlike a bucket refilling one every 12 s.
	l = NewWindow(5, time.Minute, 100, clock.Now)
	allowed := 0
	for i := 0; i < 60; i++ {
		if ok, _ := allow("c"); ok {
			allowed++
		}
		clock.Add(time.Second)
	}
	if allowed != 5 {
		t.Errorf("requests allowed in one minute: got %d, want 5", allowed)
	}
}

func TestWindowBoundedMemory(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewWindow(5, time.Minute, 10, clock.Now)
	for i := 0; i < 1000; i++ {
		l.Allow(context.Background(), fmt.Sprint("k", i))
	}
	if got := l.Len(); got > 10 {
		t.Errorf("keys under a flood: got %d, want at most 10", got)
	}
	clock.Add(time.Minute)
	l.Allow(context.Background(), "late")
	if got := l.Len(); got != 1 {
		t.Errorf("keys after a quiet window: got %d, want 1", got)
	}
}
