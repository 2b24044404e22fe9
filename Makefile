# oidcd: the two commands that matter are `make run` and `make test`.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
BIN       := bin/oidcd
DATA_DIR  ?= ./data

.PHONY: build run test bench lint fmt clean fuzz

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/oidcd

## run: a single-node provider on http://127.0.0.1:8080 with data in ./data
## and a demo organization, person and client.
run: build
	./$(BIN) serve --demo --data-dir $(DATA_DIR)

## test: every unit and black-box test, with the race detector.
test:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -count=1 -timeout 12m ./...

## bench: the benchmarks whose figures go into BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./fsm/ ./keys/ ./oidc/ ./internal/... ./node/

## fuzz: every fuzz target for FUZZTIME each (make test runs their seed corpora).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzAuthorizeQuery$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzTokenForm$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzBearer$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzIntrospectToken$$' -fuzztime $(FUZZTIME) ./oidc/
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) ./internal/seal/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeCommand$$' -fuzztime $(FUZZTIME) ./fsm/

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin

## chaos: TestChaos (node/chaos_test.go) for CHAOSTIME on 3 and on 5 nodes;
## make test runs it for 8 s on 3. A failure prints its seed: rerun it with
## CHAOSSEED=<seed>.
CHAOSTIME ?= 3m
CHAOSSEED ?= 0
.PHONY: chaos
chaos:
	$(GO) test -race -run '^TestChaos$$' -count=1 -timeout 20m -v ./node/ -chaos.duration=$(CHAOSTIME) -chaos.seed=$(CHAOSSEED)
