// Package testclock is a clock a test moves by hand and a node (or any
// component taking a func() time.Time) reads, safely from any goroutine.
package testclock

import (
	"sync"
	"time"
)

// Clock is an adjustable time source.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New is a clock that reads t until it is moved.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
