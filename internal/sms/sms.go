// Package sms sends text messages (CONTRACT.md section 4): one JSON object
// per message, appended as a line to an outbox file or POSTed to a
// webhook. Another gateway is one more Sender.
package sms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// Message is the wire shape of CONTRACT.md section 4.
type Message struct {
	To     string    `json:"to"`
	Text   string    `json:"text"`
	Code   string    `json:"code"`
	SentAt time.Time `json:"sent_at"`
}

// Sender delivers one message.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Outbox appends messages to a file, one JSON line each. The file is
// opened for each message (O_APPEND), so an operator may rotate it.
type Outbox struct {
	Path string
	mu   sync.Mutex
}

// Send appends m.
func (o *Outbox) Send(_ context.Context, m Message) error {
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	f, err := os.OpenFile(o.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sms outbox: %w", err)
	}
	_, werr := f.Write(append(line, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("sms outbox: %w", werr)
	}
	return nil
}

// Webhook POSTs each message as JSON and wants a 2xx answer.
type Webhook struct {
	URL    string
	Client *http.Client // nil: a client with a 5 s timeout
}

var defaultClient = &http.Client{Timeout: 5 * time.Second}

// Send posts m.
func (h *Webhook) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("sms webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := h.Client
	if c == nil {
		c = defaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("sms webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("sms webhook: status %d", resp.StatusCode)
	}
	return nil
}

// Multi sends through every sender and reports every failure.
type Multi []Sender

// Send sends m through each sender.
func (ms Multi) Send(ctx context.Context, m Message) error {
	var errs []error
	for _, s := range ms {
		if err := s.Send(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// New returns the sender for the configured outbox and webhook, or nil
// when neither is set (text-message sign-in is then off).
func New(outbox, webhook string) Sender {
	var ms Multi
	if outbox != "" {
		ms = append(ms, &Outbox{Path: outbox})
	}
	if webhook != "" {
		ms = append(ms, &Webhook{URL: webhook})
	}
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return ms[0]
	}
	return ms
}
