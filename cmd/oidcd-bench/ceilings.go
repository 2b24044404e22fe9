package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oidcd/oidcd/internal/password"
)

// ceilings are the physical limits of this machine that the matrix
// figures are compared with, measured in the same run.
type ceilings struct {
	// SignPerCore is RS256 signatures (RSA-2048, crypto/rsa over an ID
	// token's worth of input) per second on one goroutine; SignMs its time.
	SignPerCore float64 `json:"rs256_sign_per_core_per_s"`
	SignMs      float64 `json:"rs256_sign_ms"`
	// SignAllCores is the same with GOMAXPROCS goroutines.
	SignAllCores float64 `json:"rs256_sign_all_cores_per_s"`
	// TwoSig is GOMAXPROCS x SignPerCore / 2: sign-ins per second if
	// nothing but the ID and access token signatures cost anything.
	TwoSig float64 `json:"two_signature_signins_per_s"`
	// Argon2Ms is one argon2id hash at Argon2Params on one goroutine;
	// Argon2PerS is GOMAXPROCS / that: password sign-ins per second if
	// nothing but the hash cost anything (the node's hasher runs at most
	// GOMAXPROCS at once).
	Argon2Ms     float64 `json:"argon2id_ms"`
	Argon2Params string  `json:"argon2id_params"`
	Argon2PerS   float64 `json:"argon2id_signins_per_s"`
	// Trivial is a trivial net/http JSON handler's requests per second,
	// served by a child process like the nodes and driven by the same load
	// generator with the same workers.
	Trivial   float64 `json:"trivial_req_per_s"`
	TrivialMs latency `json:"trivial_latency_ms"`
	// TrivialCPU is what the trivial handler's run cost, server and load
	// generator (nil without --explain).
	TrivialCPU *cpuUse `json:"trivial_cpu,omitempty"`
}

// measureSign makes RS256 signatures (RSA-2048, crypto/rsa with its
// precomputed CRT values, over the SHA-256 of a 600-byte signing input,
// the size of an ID token's header and claims) on workers goroutines for
// d and returns the signatures per second: the floor under any JWT
// library, ours (jwx) included.
func measureSign(ctx context.Context, workers int, d time.Duration) (float64, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return 0, err
	}
	input := make([]byte, 600)
	rand.Read(input)
	var n atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				sum := sha256.Sum256(input)
				if _, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:]); err != nil {
					failed.Store(err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// measureArgon2 hashes with the node's parameters on one goroutine for
// about d (at least three hashes) and returns the mean time of one.
func measureArgon2(ctx context.Context, d time.Duration) (time.Duration, error) {
	h := password.New(password.DefaultParams(), 1)
	if _, err := h.Hash(ctx, "warm-up"); err != nil { // the first allocates the memory
		return 0, err
	}
	start := time.Now()
	n := 0
	for n < 3 || time.Since(start) < d {
		if _, err := h.Hash(ctx, "correct horse battery staple"); err != nil {
			return 0, err
		}
		n++
	}
	return time.Since(start) / time.Duration(n), nil
}

// measureCPUCeilings fills the signature and argon2id ceilings, each for
// about d.
func measureCPUCeilings(ctx context.Context, d time.Duration, c *ceilings) error {
	procs := runtime.GOMAXPROCS(0)
	one, err := measureSign(ctx, 1, d)
	if err != nil {
		return fmt.Errorf("RS256 ceiling: %w", err)
	}
	all, err := measureSign(ctx, procs, d)
	if err != nil {
		return fmt.Errorf("RS256 ceiling: %w", err)
	}
	hash, err := measureArgon2(ctx, d)
	if err != nil {
		return fmt.Errorf("argon2id ceiling: %w", err)
	}
	p := password.DefaultParams()
	c.SignPerCore = round1(one)
	c.SignMs = round3(1000 / one)
	c.SignAllCores = round1(all)
	c.TwoSig = round1(float64(procs) * one / 2)
	c.Argon2Ms = round3(float64(hash) / float64(time.Millisecond))
	c.Argon2Params = fmt.Sprintf("m=%d KiB, t=%d, p=%d", p.Memory, p.Time, p.Threads)
	c.Argon2PerS = round1(float64(procs) / hash.Seconds())
	return nil
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
