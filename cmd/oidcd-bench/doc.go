// Command oidcd-bench is a load generator for oidcd that behaves like many
// browsers and relying parties at once. It provisions its own organization,
// people and clients through the admin API, runs one scenario with a fixed
// number of concurrent workers until a deadline or a request count, and
// reports throughput, latency percentiles and errors by kind.
//
// It sends traffic only to loopback addresses (127.0.0.0/8, ::1,
// localhost): any other target is refused, and every connection it dials
// is checked again at connect time.
//
// Usage:
//
//	oidcd-bench [flags]            one scenario against running nodes
//	oidcd-bench matrix [flags]     `make bench`: ceilings, then every scenario on 1 and 3 nodes
//	oidcd-bench soak [flags]       `make soak`: a long mixed run and a login storm on one node
//	oidcd-bench nodes [flags]      start nodes on 127.0.0.1 and print where they are
//
// The matrix and soak commands start their nodes in a child process
// (`oidcd-bench nodes`), built with node.New the way testcluster builds
// them but with the production argon2id parameters and raft timings and
// the rate limit off, so that the load generator and the provider do not
// share a Go runtime, and the node's RSS is its own.
//
// The matrix profiles the child (its control listener serves
// /debug/pprof/profile) while every scenario runs, and counts its own CPU:
// each target it reports not met comes with the node's and the load
// generator's CPU per operation, the node cost the target would need, and
// where the node's CPU went (--explain=false leaves that out). With
// --grown N the nodes first grow their store through raft to N signed-in
// people (`oidcd-bench nodes --grown`), and --baseline sets every figure
// against an empty-store run's JSON: `make bench-grown`.
//
// Examples:
//
//	# a single node started with `oidcd serve --rate-limit off` (token in ./data/admin-token)
//	oidcd-bench --scenario password-signin --duration 30s
//
//	# silent sign-ins spread over a three-node cluster, 64 workers, JSON report
//	oidcd-bench --target http://127.0.0.1:8080,http://127.0.0.1:8081,http://127.0.0.1:8082 \
//	    --issuer http://127.0.0.1:8080 --admin-token-file ./n1/admin-token \
//	    --scenario silent-signin --concurrency 64 --json
//
//	# exactly 100000 userinfo calls, however long they take
//	oidcd-bench --scenario userinfo --requests 100000 --duration 0
//
//	# a two-hour mixed soak reporting the node's data dir size and RSS
//	oidcd-bench --scenario mixed --duration 2h --soak --data-dir ./data --pid "$(pgrep -n oidcd)"
//
// Scenarios (one operation each, timed end to end):
//
//	password-signin  fresh browser: GET /authorize, sign-in form, code (the
//	                 public client skips consent), token exchange on the
//	                 next target, ID token verified with go-oidc
//	federated-signin fresh browser signing in through an upstream oidcd
//	                 that the tool starts for the run (one node in a
//	                 process of its own, own data dir and port, holding the
//	                 run's people and passwords and a confidential client
//	                 of the targets, which know it as identity provider
//	                 "up" of the people's domain, create_or_link, only
//	                 while the scenario runs): GET /authorize with
//	                 login_hint, the upstream's password form, the
//	                 targets' /federation/up/callback, the code, the token
//	                 exchange and ID token check. Each request is timed and
//	                 split by host: the upstream's own time is the
//	                 browser's requests to it plus the targets' wait on it
//	                 at the callback (oidcd_federation_upstream_seconds on
//	                 their /metrics, before and after the run); oidcd's own
//	                 is the rest. Every person signs in once before the
//	                 clock, which makes the link: the figure is the
//	                 everyday sign-in that finds it. The matrix sets it
//	                 beside password-signin of the same run (no target)
//	silent-signin    prompt=none with the worker's live SSO session, then
//	                 the exchange and verification
//	userinfo         GET /userinfo with the worker's access token
//	introspect       POST /oauth2/introspect of that token by the
//	                 confidential client
//	discovery        GET /.well-known/openid-configuration
//	jwks             GET /.well-known/jwks.json
//	preflight        OPTIONS /oauth2/token, the CORS preflight of a page on
//	                 the public client's default web origin (not in the
//	                 matrix: oidc's BenchmarkPreflight measures it)
//	mixed            10 % password-signin, 30 % silent-signin, 40 %
//	                 userinfo, 10 % introspect, 5 % discovery, 5 % jwks
//
// Workers that need a session or a token sign in once before the clock
// starts. Operations go to the targets round robin; a sign-in runs its
// browser part on one target and the exchange on the next, as behind a
// balancer. The rate limit of the token and introspection endpoints must
// be off on the node (`--rate-limit off`), or most operations end in 429.
//
// Exit status: 0 when the run completed and at least one operation
// succeeded (errors are part of the measurement), 1 when provisioning or
// the workers' sign-in failed or nothing succeeded, 2 on a usage error.
package main
