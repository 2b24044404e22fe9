package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/oidcd/oidcd/internal/password"
)

// preloadBatch is the people of one import request (the API's maximum).
const preloadBatch = 1000

// preload grows the store before the measurements: n more people, each a
// member of the bench organization and of a ballast one, written through
// the admin API's import (POST /users/import, one replicated write per
// batch), as a site that has run for years would hold them. They share
// one argon2id hash of a random password: nobody signs in as them. Its
// cost is the least argon2id allows, so that every node takes it (a node
// refuses an imported hash dearer than its own caps, and test nodes hash
// with 64 KiB); its length, all the store keeps, is that of any other.
func preload(ctx context.Context, a *admin, w *world, n int, stderr io.Writer) error {
	var ballast struct{ ID string }
	slug := "ballast-" + randomHex(4)
	if err := a.do(ctx, "POST", "/organizations", map[string]any{"slug": slug, "name": "oidcd-bench ballast"}, &ballast, 201); err != nil {
		return err
	}
	hash, err := password.New(password.Params{Memory: 8, Time: 1, Threads: 1}, 1).Hash(ctx, randomHex(16))
	if err != nil {
		return err
	}
	began := time.Now()
	for done := 0; done < n; {
		batch := make([]map[string]any, 0, min(preloadBatch, n-done))
		for ; done < n && len(batch) < preloadBatch; done++ {
			batch = append(batch, map[string]any{
				"email": fmt.Sprintf("ballast-%s-%d@example.com", slug, done), "email_verified": true,
				"password_hash": hash, "organizations": []string{w.orgID, ballast.ID},
			})
		}
		var out struct {
			Created int `json:"created"`
		}
		if err := a.do(ctx, "POST", "/users/import", map[string]any{"users": batch}, &out, 200); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		if out.Created != len(batch) {
			return fmt.Errorf("preload: %d of %d people created", out.Created, len(batch))
		}
		if done%(100*preloadBatch) == 0 || done == n {
			logf(stderr, "preloaded %d of %d people (%.0f/s)", done, n, float64(done)/time.Since(began).Seconds())
		}
	}
	return nil
}
