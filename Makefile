# mapyard build, image, run and test targets. `make up` runs it, `make test` proves it.

VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
GO        ?= go
BIN       := bin
LDFLAGS   := -s -w -X github.com/mapyard/mapyard/orchestrator.Version=$(VERSION) -X github.com/mapyard/mapyard/orchestrator.Commit=$(COMMIT)
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
GOROOT    := $(shell $(GO) env GOROOT)

# Packages whose tests also run compiled to WebAssembly under node (code the browser runs).
WASM_PKGS := ./mapserver/mapgen
# Fuzz targets run briefly by `make test`, as package:FuzzName.
FUZZ_TARGETS := ./mapserver/mapgen:FuzzGenerate
FUZZTIME  ?= 10s

.PHONY: all build images up down test test-go test-wasm test-fuzz bench lint clean

all: build

build:
	@mkdir -p $(BIN)
	$(GOBUILD) -o $(BIN)/orchestrator ./orchestrator/cmd/orchestrator
	$(GOBUILD) -o $(BIN)/mapserver ./mapserver/cmd/mapserver
	GOOS=js GOARCH=wasm $(GOBUILD) -o $(BIN)/mapgen.wasm ./mapserver/cmd/mapgen-wasm
	cp "$(GOROOT)/lib/wasm/wasm_exec.js" $(BIN)/

test: images test-go test-wasm test-fuzz

test-go:
	$(GO) test -count=1 ./...

test-wasm:
	@for p in $(WASM_PKGS); do \
		echo "wasm: $$p"; \
		PATH="$$PATH:$(GOROOT)/lib/wasm" GOOS=js GOARCH=wasm $(GO) test -count=1 $$p || exit 1; \
	done

test-fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz: $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	done

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
