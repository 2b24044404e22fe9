# oidcd: the two commands that matter are `make run` and `make test`.
GO        ?= go
## VERSION: the build's version, from the VERSION file and the commits since
## it last changed (tools/version.sh; RELEASES explains the scheme), worked
## out once; `make build VERSION=...` overrides it.
ifeq ($(origin VERSION),undefined)
VERSION   := $(shell sh tools/version.sh)
endif
ifeq ($(VERSION),)
$(error no version: tools/version.sh failed (its message is above))
endif
LDFLAGS   := -X main.version=$(VERSION)
BIN       := bin/oidcd
DEMO_RP   := bin/oidcd-demo-rp
DATA_DIR  ?= ./data

.PHONY: build run test bench bench-grown bench-grown-store bench-lifecycle bench-edge bench-audit bench-email bench-micro soak lint fmt clean fuzz package sbom

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/oidcd
	$(GO) build -o $(DEMO_RP) ./cmd/oidcd-demo-rp

## run: a single-node provider on http://127.0.0.1:8080 with data in ./data
## and a demo organization, person and client, and beside it the demo
## relying party on http://127.0.0.1:9090 (bin/oidcd-demo-rp). Mail to
## people (password resets, invitations) goes to ./data/outbox.jsonl, one
## JSON line a message; the node says so as it starts. Ctrl-C stops both.
run: build
	@./$(DEMO_RP) --issuer http://127.0.0.1:8080 --addr 127.0.0.1:9090 & rp=$$!; \
	trap 'kill $$rp 2>/dev/null' INT TERM EXIT; \
	./$(BIN) serve --demo --data-dir $(DATA_DIR) --email-outbox $(DATA_DIR)/outbox.jsonl; \
	status=$$?; kill $$rp 2>/dev/null; wait $$rp; exit $$status

## package: the Debian package dist/oidcd_<version>_<arch>.deb, built in Go
## with nfpm (no packaging tool needed). PKGARCH picks the architecture.
## Beside it, dist/oidcd_<version>_<arch>.cdx.json, the bill of materials
## of the binary it ships (also in the package, /usr/share/doc/oidcd/
## oidcd.cdx.json), and dist/SHA256SUMS listing both, for `sha256sum -c
## SHA256SUMS` (docs/operators/install.md, "Checking what you were handed").
PKGARCH ?= $(shell $(GO) env GOARCH)
package: build
	GOOS=linux GOARCH=$(PKGARCH) CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o dist/oidcd-linux-$(PKGARCH) ./cmd/oidcd
	cd tools && $(GO) run ./cmd/oidcd-package --binary ../dist/oidcd-linux-$(PKGARCH) --tool ../$(BIN) --root .. --arch $(PKGARCH) --version $(VERSION) --out ../dist/

## sbom: bin/oidcd.cdx.json, the software bill of materials of bin/oidcd:
## CycloneDX JSON of every module the binary links, read from its own build
## record (what `go version -m bin/oidcd` shows), with each module's licence
## found in its files in the module cache (tools/sbom). Reads local files
## only.
sbom: build
	cd tools && $(GO) run ./cmd/oidcd-sbom --binary ../$(BIN) --root .. --version $(VERSION) --out ../bin/oidcd.cdx.json

## test: every unit and black-box test, with the race detector.
## Browser tests need chromium, the load-balancer tests HAProxy, the
## directory tests slapd, the mail tests Exim, the Apache test apache2 with mod_auth_openidc
## and the Node relying-party and accessibility (axe-core) tests Node and their npm packages: the
## ensure-*.sh scripts install them (apt-get, npm ci) when missing; without
## them those tests are skipped, except under CI=true where they fail.
test:
	$(GO) mod verify
	@sh scripts/ensure-chromium.sh || [ "$${CI:-}" != true ]
	@sh scripts/ensure-haproxy.sh || [ "$${CI:-}" != true ]
	@sh scripts/ensure-slapd.sh || [ "$${CI:-}" != true ]
	@sh scripts/ensure-apache-oidc.sh || [ "$${CI:-}" != true ]
	@sh scripts/ensure-node.sh || [ "$${CI:-}" != true ]
	@sh scripts/ensure-smtp.sh || [ "$${CI:-}" != true ]
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -count=1 -timeout 12m ./...
	cd tools && $(GO) vet ./packaging/ ./sbom/ ./cmd/... && $(GO) test -count=1 -timeout 5m ./packaging/ ./sbom/

## bench: every Speed II figure in one run (about 25 minutes): the matrix
## of BENCHMARKS.md (this machine's ceilings: RS256 per core, one argon2id
## hash, a trivial net/http handler; then every oidcd-bench scenario on one
## node and on three, BENCHTIME each, each target it misses explained from
## that run's profiles; the generated section of BENCHMARKS.md, figures in
## bin/bench.json), then bench-grown, the soak (SOAKTIME), start-up and
## stop, edge replicas and the audit trail.
BENCHTIME ?= 8s
bench:
	$(GO) build -o bin/oidcd-bench ./cmd/oidcd-bench
	./bin/oidcd-bench matrix --benchtime $(BENCHTIME) --write BENCHMARKS.md --json bin/bench.json \
		--command "make bench BENCHTIME=$(BENCHTIME)"
	$(MAKE) bench-grown
	$(MAKE) soak
	$(MAKE) bench-lifecycle
	$(MAKE) bench-edge
	$(MAKE) bench-audit
	$(MAKE) bench-email

## bench-grown: what grows with the state. For each of GROWN_SIZES, the
## matrix on one node whose store was first grown through raft to that
## many signed-in people (two memberships, a live SSO session, app session
## and access token each), set against the empty store's figures of the
## last `make bench` (bin/bench.json) and written into BENCHMARKS.md after
## them; then bench-grown-store. GROWN_SIZES="10000 100000 1000000" is the
## issue's full set (about an hour and 40 GiB of disk).
GROWN_SIZES ?= 10000 100000
GROWN_MOST   = $(lastword $(GROWN_SIZES))
bench-grown:
	$(GO) build -o bin/oidcd-bench ./cmd/oidcd-bench
	test -f bin/bench.json || { echo "bench-grown compares with bin/bench.json: run make bench first"; exit 1; }
	for n in $(GROWN_SIZES); do \
		./bin/oidcd-bench matrix --sizes 1 --grown $$n --baseline bin/bench.json --benchtime $(BENCHTIME) \
			--write BENCHMARKS.md --json bin/bench-grown-$$n.json --command "make bench-grown GROWN_SIZES=$$n" || exit 1; \
	done
	$(MAKE) bench-grown-store GROWN_SIZES="$(GROWN_SIZES)"

## bench-grown-store: the store and the audit trail at scale, without the
## matrix (BENCHMARKS.md, "Store and trail at scale"; the figures go in by
## hand). Three nodes grown to 10,000 people and up to the largest of
## GROWN_SIZES, with GROWN_CLUSTER_EVENTS audit events through raft: each
## node's state file, trail and data dir, a raft snapshot, a wiped
## follower's catch-up (the snapshot, then the trail it lacks fetched from
## a peer, verified), a reap. Then one replica grown straight through its
## apply to the same sizes with GROWN_EVENTS events, its snapshot, and a
## second replica's restore of it and fetch of its trail (raft records
## about 3,000 events a second here: 10 million would take the cluster
## most of an hour a size). And the FSM's own snapshot and restore.
## `make bench-grown-store GROWN_SIZES="100000 1000000" GROWN_EVENTS=10000000`
## is the issue's run (about an hour and a half, and 40 GiB of disk under
## TMPDIR for the three nodes at a million people).
GROWN_EVENTS         ?= 100000
GROWN_CLUSTER_EVENTS ?= 100000
bench-grown-store:
	$(GO) test -v -run '^$$' -bench 'GrownCluster' -benchtime 1x -count=1 -timeout 240m ./node/ \
		-args -grown.people=$(GROWN_MOST) -grown.events=$(GROWN_CLUSTER_EVENTS)
	$(GO) test -v -run '^$$' -bench 'GrownReplica' -benchtime 1x -count=1 -timeout 240m ./node/ \
		-args -grown.people=$(GROWN_MOST) -grown.events=$(GROWN_EVENTS)
	$(GO) test -run '^$$' -bench 'Snapshot$$|Restore$$' -benchtime 1x -count=1 -timeout 120m ./fsm/ -args -grown.people=$(GROWN_MOST)

## bench-lifecycle: exec-to-ready of the built binary (one node, one node
## restarted, three nodes; beside the floor of exec to exit of `oidcd
## version`) and the longest write stall while a leader of three stops,
## with the hand-over SIGTERM does and without it. The figures go into
## BENCHMARKS.md's "Start-up and stop" by hand.
bench-lifecycle:
	$(GO) test -run '^$$' -bench 'ExecToReady' -benchtime 10x -count=1 ./cmd/oidcd/
	$(GO) test -run '^$$' -bench 'LeaderRestartWriteStall' -benchtime 5x -count=1 ./node/

## bench-edge: edge replicas over a simulated 40 ms link (one way): the
## core's commit latency with 0 and 5 non-voters, userinfo and silent
## sign-ins on an edge replica, beside the round trip of the link itself.
## The figures go into BENCHMARKS.md's "Edge replicas" by hand.
bench-edge:
	$(GO) test -run '^$$' -bench 'LinkRoundTrip' -benchtime 50x -count=1 ./testcluster/
	$(GO) test -run '^$$' -bench 'BenchmarkEdge' -benchtime 300x -count=1 ./node/

## bench-audit: what the audit trail costs: a silent sign-in with and
## without it on one node, one apply plain and stamped, and the trail's
## bytes per password sign-in.
bench-audit:
	$(GO) test -run '^$$' -bench 'AuditTrail' -benchtime 400x -count 5 ./node/
	$(GO) test -run '^$$' -bench 'ApplyRevokeToken' -benchmem -count 3 ./fsm/

## bench-email: mail to people. Messages committed and delivered a second
## on one node and on three, to the outbox file and through a real Exim
## (STARTTLS), beside the raft commit rate of no-op commands in the same
## run; and the forgotten-password page's answer time for a known and an
## unknown address, alternately, without and with the answer floor.
## The figures go into BENCHMARKS.md by hand.
bench-email:
	$(GO) test -run '^$$' -bench 'BenchmarkEmailDelivery' -benchtime 2000x -count=1 ./node/
	$(GO) test -run '^$$' -bench 'ForgotKnownUnknown' -benchtime 40x -count=1 ./signin/

## bench-micro: the go test micro-benchmarks of the packages.
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./fsm/ ./keys/ ./oidc/ ./internal/... ./node/

## soak: SOAKTIME of the mixed profile against one node with its data dir
## and RSS watched (start, minute 2, end, peak, the change between the
## medians of 30 s around minute 2 and before the end; the data dir by file
## at minute 2 and at the end), then a 200-connection login storm that shows
## argon2id memory bounded by the hasher's semaphore.
SOAKTIME ?= 10m
soak:
	$(GO) build -o bin/oidcd-bench ./cmd/oidcd-bench
	./bin/oidcd-bench soak --duration $(SOAKTIME)

## fuzz: every fuzz target for FUZZTIME each (make test runs their seed corpora).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzAuthorizeQuery$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzTokenForm$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzParseForm$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzBearer$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzIntrospectToken$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) ./internal/seal/
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) ./internal/kek/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeCommand$$' -fuzztime $(FUZZTIME) ./fsm/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(FUZZTIME) ./fsm/
	$(GO) test -run '^$$' -fuzz '^FuzzNormalizePhone$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzTOTPStep$$' -fuzztime $(FUZZTIME) ./internal/factor/

## lint: go vet, the gofmt check, staticcheck and gosec; all must be clean.
## A gosec finding is fixed, or excused at its line with
## `// #nosec Gxxx -- reason`. Excluded for the whole tree, and why:
##   G104 (an error not checked): the unchecked calls are clean-up on paths
##     that already fail (Close, Remove, Cancel, Shutdown), deadlines on
##     connections whose next read or write reports any failure, writes to
##     a bufio.Writer whose Flush is checked, and ResponseWriter writes to a
##     client that may have left. Errors that change an outcome are checked.
##   testcluster, internal/testkit: imported by tests
##     only, never linked into oidcd (gosec already skips _test.go files).
##   cmd/oidcd-bench: the developer's load generator, not shipped. It reads
##     paths and URLs from its own flags (loopback targets only:
##     TestLoopbackOnlyDialGuard), re-runs its own executable to host
##     nodes, and uses math/rand to vary its workers' choices.
GOSEC_FLAGS := -quiet -exclude=G104 -exclude-dir=testcluster -exclude-dir=internal/testkit \
	-exclude-dir=cmd/oidcd-bench
## The linters, the Debian packager (nfpm) and the libraries of the bill of
## materials (CycloneDX) live in their own module
## (tools/go.mod), so the product's go.mod and go.sum list only what oidcd
## and its tests use; the linters are built from there into bin/ and run
## over both modules.
lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	cd tools && $(GO) build -o ../bin/ honnef.co/go/tools/cmd/staticcheck github.com/securego/gosec/v2/cmd/gosec
	./bin/staticcheck ./...
	./bin/gosec $(GOSEC_FLAGS) ./...
	cd tools && ../bin/staticcheck ./packaging/ ./sbom/ ./cmd/... && ../bin/gosec -quiet -exclude=G104 ./packaging/ ./sbom/ ./cmd/...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin dist

## chaos: TestChaos (node/chaos_test.go) for CHAOSTIME on 3 and on 5 nodes,
## then TestChaosMixedVersions (cmd/oidcd/mixedchaos_test.go: one node of
## the previous release in RELEASES, two of this tree, as real processes)
## for CHAOSTIME; make test runs each for 8 s. A failure prints its seed:
## rerun it with CHAOSSEED=<seed>.
CHAOSTIME ?= 3m
CHAOSSEED ?= 0
.PHONY: chaos
chaos:
	$(GO) test -race -run '^TestChaos$$' -count=1 -timeout 20m -v ./node/ -chaos.duration=$(CHAOSTIME) -chaos.seed=$(CHAOSSEED)
	$(GO) test -run '^TestChaosMixedVersions$$' -count=1 -timeout 20m -v ./cmd/oidcd/ -chaos.duration=$(CHAOSTIME) -chaos.seed=$(CHAOSSEED)
