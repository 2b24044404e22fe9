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

// Message is the wire shape of a text message: one JSON object, a line of
// --sms-outbox or the body POSTed to --sms-webhook.
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

// Webhook POSTs each message as JSON and wants a 2xx answer. It never
// follows a redirect: a 307 or 308 would post the code to wherever the
// answer points, so any 3xx is a failure.
type Webhook struct {
	URL    string
	Client *http.Client // nil: NewWebhookClient()
}

// webhookTimeout bounds one webhook call.
const webhookTimeout = 5 * time.Second

// NewWebhookClient is the webhook's HTTP client: a 5 s timeout, no
// redirects followed.
func NewWebhookClient() *http.Client {
	return &http.Client{
		Timeout:       webhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

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
		c = NewWebhookClient()
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

// Background sends through Sender on a goroutine of its own and returns
// at once, so the sign-in page answers in the same time whether or not
// the number has an account (the unknown number is sent nothing), and a
// slow gateway cannot be timed to tell them apart. At most maxBackground
// sends are in flight; beyond that Send fails at once. A failed send is
// reported to OnError.
type Background struct {
	Sender  Sender
	OnError func(error)
	slots   chan struct{}
	once    sync.Once
}

const maxBackground = 32

// Send hands m to a goroutine; it fails only when too many are in flight.
func (b *Background) Send(_ context.Context, m Message) error {
	b.once.Do(func() { b.slots = make(chan struct{}, maxBackground) })
	select {
	case b.slots <- struct{}{}:
	default:
		return errors.New("sms: too many messages in flight")
	}
	go func() {
		defer func() { <-b.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), 2*webhookTimeout)
		defer cancel()
		if err := b.Sender.Send(ctx, m); err != nil && b.OnError != nil {
			b.OnError(err)
		}
	}()
	return nil
}

// New returns the sender for the configured outbox and webhook, or nil
// when neither is set (text-message sign-in is then off). The outbox
// file is written at once (local, constant time); the webhook is called
// in the background (Background), its failures reported to onError.
func New(outbox, webhook string, onError func(error)) Sender {
	var ms Multi
	if outbox != "" {
		ms = append(ms, &Outbox{Path: outbox})
	}
	if webhook != "" {
		ms = append(ms, &Background{Sender: &Webhook{URL: webhook}, OnError: onError})
	}
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return ms[0]
	}
	return ms
}
