# Agent Mesh. `make run` starts the whole mesh on an embedded NATS server with
# the offline planner (no API key); `make test` runs every test with -race;
# `make test-short` is the inner loop: the unit tests and a smoke of the
# end-to-end tests.

GO          ?= go
BIN         := $(CURDIR)/bin
# The release is mesh.Release (mesh/release.go); a build stamps its commit.
VERSION     := $(shell sed -n 's/^const Release = "\(.*\)"/\1/p' mesh/release.go)
COMMIT      ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
LDFLAGS     := -X main.commit=$(COMMIT)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_FLAGS  ?=

# The npm peers the end-to-end tests drive (@ag-ui/client, playwright-core,
# @modelcontextprotocol/server-filesystem, the MCP SDK and Inspector …),
# pinned by package-lock.json. `make test` installs them first when node and
# npm are on PATH; without them those tests skip (and fail under CI=true).
PEERS       := cmd/mesh/e2e/testdata/peers
NPM         ?= npm
HAVE_NODE   := $(shell command -v node >/dev/null 2>&1 && command -v $(NPM) >/dev/null 2>&1 && echo yes)

IMAGE       ?= agentmesh/mesh:dev
COMPOSE     ?= docker compose
# build-all: mesh for Linux, macOS and Windows on amd64 and arm64 (no cgo,
# static). Nothing needs cgo: the sample MCP server's SQLite is pure Go.
PLATFORMS   := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

.PHONY: all build build-all release run test test-short lint check bench bench-cluster chaos chaos-cluster clean peers image compose-up compose-down

all: build

## build: the mesh binary and the sample MCP server, side by side in bin/
## (static: no C compiler is needed)
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/mesh ./cmd/mesh
	CGO_ENABLED=0 $(GO) build -o $(BIN)/mcp-resources ./cmd/mcp-resources

## build-all: bin/<os>-<arch>/mesh for linux, darwin and windows on amd64 and arm64
build-all: build
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "mesh $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/$$os-$$arch/mesh$$ext ./cmd/mesh || exit 1; \
	done

## release: dist/ holds, for every platform of build-all, an archive of mesh
## with README.md and CHANGELOG.md, its CycloneDX SBOM (the modules built
## in, read from the binary), and SHA256SUMS of them all
CYCLONEDX := github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
release: build-all
	@rm -rf dist && mkdir -p dist
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  name=mesh_$(VERSION)_$${os}_$${arch}; \
	  echo "dist/$$name.tar.gz"; \
	  $(GO) run $(CYCLONEDX) bin -json -output dist/$$name.cdx.json -version v$(VERSION) $(BIN)/$$os-$$arch/mesh$$ext || exit 1; \
	  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -czf dist/$$name.tar.gz \
	    -C $(BIN)/$$os-$$arch mesh$$ext -C $(CURDIR) README.md CHANGELOG.md || exit 1; \
	done
	@cd dist && sha256sum *.tar.gz *.cdx.json > SHA256SUMS && cat SHA256SUMS

## image: the container image of every role (deploy/Dockerfile)
image:
	docker build -f deploy/Dockerfile --build-arg COMMIT=$(COMMIT) --label org.opencontainers.image.version=$(VERSION) -t $(IMAGE) .

## compose-up: the 3-node cluster and every role in containers (needs .env: deploy/compose.env.example)
compose-up:
	MESH_IMAGE=$(IMAGE) $(COMPOSE) up -d --build --wait

## compose-down: stop the containers (the volumes stay: compose-down ARGS=-v drops them)
compose-down:
	$(COMPOSE) down $(ARGS)

## run: every role on the embedded NATS server (http://127.0.0.1:8080)
run: build
	PATH="$(BIN):$$PATH" $(BIN)/mesh up

## test: the whole suite, with the race detector (the timeout only guards against a hang)
# The end-to-end tests run every time (-count=1): they drive the binaries
# `go build` makes from the sources when they start, which the go command's
# test cache does not see, so a cached pass could hide a change.
E2E         := ./cmd/mesh/e2e
test: $(if $(HAVE_NODE),peers)
	$(GO) test -race -timeout 30m $(TEST_FLAGS) $$($(GO) list ./... | grep -v '/cmd/mesh/e2e$$')
	$(GO) test -race -count=1 -timeout 30m $(TEST_FLAGS) $(E2E)

## test-short: the unit tests with -race and -short, then a smoke of the end-to-end tests
# The smoke: the mesh starts and lists its tools, a destructive turn waits
# for its approval and runs once approved, every NATS identity against
# every subject on both servers, and the official AG-UI client (an npm
# peer) through a turn and its approval. -short skips the parts of the
# unit tests that wait for a TTL or form a cluster (make test runs them).
# The unit tests wait on NATS more than they compute: four packages at a
# time (-p 4) finish sooner than two on two cores. The smoke runs without
# -race, which make test keeps for the whole end-to-end suite.
E2E_SMOKE   := ^(TestStartupHealthAndTools|TestDestructiveToolWithApproval|TestNATSIdentitySubjectMatrix|TestAGUIOfficialClient)$$
test-short: $(if $(HAVE_NODE),peers)
	$(GO) test -race -short -p 4 -timeout 10m $(TEST_FLAGS) $$($(GO) list ./... | grep -v '/cmd/mesh/e2e$$')
	$(GO) test -short -count=1 -timeout 10m -run '$(E2E_SMOKE)' $(TEST_FLAGS) $(E2E)

## peers: install the tests' npm peers in cmd/mesh/e2e/testdata/peers (npm ci)
peers: $(PEERS)/node_modules/.package-lock.json

$(PEERS)/node_modules/.package-lock.json: $(PEERS)/package.json $(PEERS)/package-lock.json
	$(NPM) ci --prefix $(PEERS) --no-audit --no-fund
	cd $(PEERS)/a2a-go && $(GO) mod download

## chaos: the chaos test at full scale: 50 conversations, 60 s of random kills
chaos:
	MESH_CHAOS_SECONDS=60 MESH_CHAOS_CONVERSATIONS=50 $(GO) test -race -count=1 -timeout 30m -run '^TestChaos$$' -v ./cmd/mesh/e2e/

## chaos-cluster: the cluster chaos tests at full scale: 50 conversations while NATS nodes die
chaos-cluster:
	MESH_CLUSTER_CONVERSATIONS=50 MESH_CLUSTER_SECONDS=90 $(GO) test -race -count=1 -timeout 40m -run '^TestCluster(Chaos|PlainNATS|RollingRestart|RollingUpgrade|LostMajority)$$' -v ./cmd/mesh/e2e/

## lint: gofmt, go mod tidy (changes nothing), go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^vendor/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## check: what to run before sending a change: lint, then the whole suite
check: lint test

## bench: latency and throughput figures (see docs/benchmarks.md)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s -timeout 30m ./...

## bench-cluster: turns/s at 1, 2 and 4 agent replicas on a 3-node cluster, and the event path's p99, against one server
bench-cluster:
	$(GO) test -run '^$$' -bench '^BenchmarkCluster' -benchtime 1x -timeout 30m -v ./cmd/mesh/e2e/

clean:
	rm -rf $(BIN) dist
