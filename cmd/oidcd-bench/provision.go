package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// redirectURI is registered on both clients and never dialed: the tool
// reads the code from the Location header (port 1 is tcpmux, unused).
const redirectURI = "http://127.0.0.1:1/cb"

// person is a provisioned user.
type person struct {
	id, email, password string
}

// world is what the tool provisioned for its run.
type world struct {
	orgID, slug        string
	people             []person
	publicID           string // public, skip_consent
	confID, confSecret string // confidential
	clientIDs          []string
}

// admin calls /admin/v1 on one node.
type admin struct {
	base  string // e.g. http://127.0.0.1:8080/admin/v1
	token string
	hc    *http.Client
}

// do sends a JSON request and decodes a JSON answer into out (when not
// nil); any status other than want is an error quoting the answer.
func (a *admin) do(ctx context.Context, method, path string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "oidcd-bench")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "DELETE" {
		// Deleting twice is harmless: let the transport retry on a kept-alive
		// connection the server closed just as it was reused (an empty key
		// marks the request idempotent without sending the header).
		req.Header["Idempotency-Key"] = []string{}
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// provision creates an organization bench-<random>, users people with
// random passwords and memberships, a public skip_consent client and a
// confidential one, whose tokens live tokenTTL seconds (the default, a
// day, means a run never meets an expired one in the middle of an
// operation; a soak passes a few minutes so that the reaper has work).
func provision(ctx context.Context, a *admin, users int, tokenTTL int64) (*world, error) {
	suffix := randomHex(4)
	w := &world{slug: "bench-" + suffix}
	var org struct{ ID string }
	if err := a.do(ctx, "POST", "/organizations", map[string]any{"slug": w.slug, "name": "oidcd-bench " + suffix}, &org, 201); err != nil {
		return nil, err
	}
	w.orgID = org.ID
	w.people = make([]person, users)
	err := parallel(ctx, users, 8, func(ctx context.Context, i int) error {
		p := person{email: fmt.Sprintf("bench-%s-%d@example.com", suffix, i), password: randomHex(16)}
		var u struct{ ID string }
		if err := a.do(ctx, "POST", "/users", map[string]any{"email": p.email, "email_verified": true, "password": p.password}, &u, 201); err != nil {
			return err
		}
		p.id = u.ID
		w.people[i] = p
		return a.do(ctx, "POST", "/memberships", map[string]any{"user_id": p.id, "org_id": w.orgID}, nil, 201)
	})
	if err != nil {
		return w, err
	}
	type client struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	var pub, conf client
	common := map[string]any{"redirect_uris": []string{redirectURI}, "scopes": []string{"openid", "email", "profile"},
		"organization_id": w.orgID, "skip_consent": true, "access_token_ttl": tokenTTL}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range common {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	if err := a.do(ctx, "POST", "/clients", with(map[string]any{"name": "oidcd-bench public " + suffix, "type": "public"}), &pub, 201); err != nil {
		return w, err
	}
	w.publicID = pub.ClientID
	w.clientIDs = append(w.clientIDs, pub.ClientID)
	if err := a.do(ctx, "POST", "/clients", with(map[string]any{"name": "oidcd-bench confidential " + suffix, "type": "confidential"}), &conf, 201); err != nil {
		return w, err
	}
	w.confID, w.confSecret = conf.ClientID, conf.ClientSecret
	w.clientIDs = append(w.clientIDs, conf.ClientID)
	if w.confSecret == "" {
		return w, fmt.Errorf("POST /clients: the confidential client came without a client_secret")
	}
	return w, nil
}

// unprovision deletes what provision created, the clients first so that
// no new sign-in starts, then the people (every session ends) and the
// organization. Errors are collected, not fatal.
func unprovision(ctx context.Context, a *admin, w *world) error {
	var errs []string
	var mu sync.Mutex
	note := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err.Error())
			mu.Unlock()
		}
	}
	for _, id := range w.clientIDs {
		note(a.do(ctx, "DELETE", "/clients/"+id, nil, nil, 204))
	}
	_ = parallel(ctx, len(w.people), 8, func(ctx context.Context, i int) error {
		if id := w.people[i].id; id != "" {
			note(a.do(ctx, "DELETE", "/users/"+id, nil, nil, 204))
		}
		return nil
	})
	if w.orgID != "" {
		note(a.do(ctx, "DELETE", "/organizations/"+w.orgID, nil, nil, 204))
	}
	if len(errs) > 0 {
		return fmt.Errorf("clean-up: %s", strings.Join(errs, "; "))
	}
	return nil
}

// parallel runs fn(0..n-1) with at most limit at once and returns the
// first error; after an error no new call starts.
func parallel(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	sem := make(chan struct{}, limit)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		}(i)
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		// Cancelled from outside, not by an error of ours.
		return context.Cause(ctx)
	}
	return firstErr
}
