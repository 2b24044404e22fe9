// Package ratelimit is the request-rate guard (--rate-limit): the
// Limiter interface by which a handler asks whether one more request may
// proceed, and Window, the exact sliding-window limiter behind it. A
// cluster runs one Window on its leader and serves it to every node
// (cluster.Cluster.RateLimiter), so a limit holds for the cluster as a
// whole. A key made by Own carries a limit of its own (a client's
// rate_limit) to that one Window, inside the key,
// so the shared limiter needs no other way to pass it. A leaf package: it
// imports nothing of ours.
package ratelimit
