# Agent Mesh. `make run` starts the whole mesh on an embedded NATS server with
# the offline planner (no API key); `make test` runs every test with -race.

GO          ?= go
BIN         := $(CURDIR)/bin
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_FLAGS  ?=

# The npm peers the end-to-end tests drive (@ag-ui/client, playwright-core,
# @modelcontextprotocol/server-filesystem),
# pinned by package-lock.json. `make test` installs them first when node and
# npm are on PATH; without them those tests skip (and fail under CI=true).
PEERS       := cmd/mesh/e2e/testdata/peers
NPM         ?= npm
HAVE_NODE   := $(shell command -v node >/dev/null 2>&1 && command -v $(NPM) >/dev/null 2>&1 && echo yes)

.PHONY: all build run test lint bench chaos clean peers

all: build

## build: the mesh binary and the sample MCP server, side by side in bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/mesh ./cmd/mesh
	$(GO) build -o $(BIN)/mcp-resources ./cmd/mcp-resources

## run: every role on the embedded NATS server (http://127.0.0.1:8080)
run: build
	PATH="$(BIN):$$PATH" $(BIN)/mesh up

## test: the whole suite, with the race detector
test: $(if $(HAVE_NODE),peers)
	$(GO) test -race -timeout 20m $(TEST_FLAGS) ./...

## peers: install the tests' npm peers in cmd/mesh/e2e/testdata/peers (npm ci)
peers: $(PEERS)/node_modules/.package-lock.json

$(PEERS)/node_modules/.package-lock.json: $(PEERS)/package.json $(PEERS)/package-lock.json
	$(NPM) ci --prefix $(PEERS) --no-audit --no-fund
	cd $(PEERS)/a2a-go && $(GO) mod download

## chaos: the chaos test at full scale: 50 conversations, 60 s of random kills
chaos:
	MESH_CHAOS_SECONDS=60 MESH_CHAOS_CONVERSATIONS=50 $(GO) test -race -count=1 -timeout 30m -run '^TestChaos$$' -v ./cmd/mesh/e2e/

## lint: gofmt, go mod tidy (changes nothing), go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^vendor/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## bench: latency and throughput figures (see README: Benchmarks)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s -timeout 30m ./...

clean:
	rm -rf $(BIN)
