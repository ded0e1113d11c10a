# mapyard build, image, run and test targets. `make up` runs it, `make test` proves it.

VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Once: the images a run builds and the tests it runs name the same tag, even when the
# tree changes meanwhile.
VERSION   := $(VERSION)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
GO        ?= go
BIN       := bin
LDFLAGS   := -s -w -X github.com/mapyard/mapyard/orchestrator.Version=$(VERSION) -X github.com/mapyard/mapyard/mapserver.Version=$(VERSION) -X github.com/mapyard/mapyard/orchestrator.Commit=$(COMMIT) -X github.com/mapyard/mapyard/orchestrator/edge.Version=$(VERSION)
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
GOROOT    := $(shell $(GO) env GOROOT)

# Packages whose tests also run compiled to WebAssembly under node (code the browser runs).
WASM_PKGS := ./mapserver/kernel/mapgen ./mapserver/sim ./mapserver/wire ./mapserver/aoi ./mapserver/kernel/items
# Fuzz targets run briefly by `make test`, as package:FuzzName.
FUZZ_TARGETS := ./orchestrator/ticket:FuzzVerify ./mapserver/kernel/mapcontract:FuzzUnmarshal ./mapserver/kernel/mapgen:FuzzGenerate ./mapserver/wire:FuzzDecodeSnapshot ./mapserver/wire:FuzzDecodeInputBatch ./mapserver/wire:FuzzDecodeInbound ./mapserver/kernel/items:FuzzApply
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can report a
# spurious "context deadline exceeded" when time runs out under load (go.dev/issue/75804).
FUZZTIME  ?= 50000x

# Evaluated when a recipe uses them (`=`, not `:=`): on a fresh machine the engine and
# compose are installed by the `engine` target, after make has read this file.
COMPOSE    = $(shell if docker compose version >/dev/null 2>&1; then echo "docker compose"; \
		elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; fi)
# The compose project (PROJECT=... runs a second kit beside the first, with its own
# ports, network and deployment in compose/mapyard.env).
PROJECT   ?= mapyard
COMPOSE_ARGS := -p $(PROJECT) -f compose/compose.yaml
DOCKER_GID ?= $(shell stat -c %g /var/run/docker.sock 2>/dev/null || echo 0)
# The host's settings (docs/configuration.md); compose reads it into both services.
ENV_FILE  := compose/mapyard.env
# The map network the orchestrator creates (ORCH_MAP_NETWORK), which `make reset` removes,
# and the deployment label of its map containers (ORCH_DEPLOYMENT), which `make down`
# and `make reset` remove: never another deployment's (tests run their own).
setting    = $(shell sed -n 's/^$(1)=//p' $(ENV_FILE) 2>/dev/null | tail -1)
MAP_NETWORK ?= $(or $(call setting,ORCH_MAP_NETWORK),mapyard)
# What `make up` waits for: the edge's /readyz on its loopback metrics listener, which
# answers the same whether the public listener speaks HTTP or HTTPS.
EDGE_READYZ = http://$(patsubst :%,127.0.0.1:%,$(or $(call setting,EDGE_METRICS_ADDR),127.0.0.1:9101))/readyz
DEPLOYMENT  ?= $(or $(call setting,ORCH_DEPLOYMENT),mapyard)
RM_MAPS     = ids=$$(docker ps -aq --filter label=io.mapyard.managed=true --filter label=io.mapyard.deployment=$(DEPLOYMENT)); \
		if [ -n "$$ids" ]; then echo "removing map containers"; docker rm -f $$ids >/dev/null; fi

# The kit on Docker Swarm (compose/stack.yaml; docs/scale-out.md, "The kit on Swarm"):
# the stack's name, which its services' DNS names carry (mapyard_orchestrator), the
# overlay network it declares, and the edge's published port. The map services of the
# deployment are removed by label, as RM_MAPS removes map containers.
STACK         := mapyard
STACK_FILE    := compose/stack.yaml
STACK_NETWORK := mapyard-maps
MAPYARD_PORT  ?= 8080
SWARM_MANAGER = state=$$(docker info --format '{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}' 2>/dev/null); \
		if [ "$$state" != "active true" ]; then \
			echo "this Docker engine is not a Swarm manager (node state: $${state% *}): run 'docker swarm init' on it, or join it to a Swarm as a manager, then try again"; exit 1; fi
RM_MAP_SERVICES = ids=$$(docker service ls -q --filter label=io.mapyard.managed=true --filter label=io.mapyard.deployment=$(DEPLOYMENT)); \
		if [ -n "$$ids" ]; then echo "removing map services"; docker service rm $$ids >/dev/null; fi

# The browser client's module and its loader, embedded by the edge (in both binaries
# that carry it): built before them, never committed.
PAGE_GEN  := orchestrator/edge/static/gen

# The Node.js example map's image (mapserver/examples/node), tagged with the version and
# latest like the kit's own.
NODE_MAP_IMAGE := mapyard/node-map

.PHONY: all engine build page images node-map-image up down reset up-swarm down-swarm test test-images test-go test-wasm test-fuzz conform soak bench bench-w1 bench-w1-edge bench-w2 bench-w3 bench-handover bench-upgrade bench-swarm upgrade lint clean docs goldens readme-shots

all: build

build: page
	@mkdir -p $(BIN)
	$(GOBUILD) -o $(BIN)/orchestrator ./orchestrator/cmd/orchestrator
	$(GOBUILD) -o $(BIN)/edge ./orchestrator/cmd/edge
	$(GOBUILD) -o $(BIN)/mapserver ./mapserver/cmd/mapserver
	$(GOBUILD) -o $(BIN)/tagserver ./mapserver/cmd/tagserver
	$(GOBUILD) -o $(BIN)/fakeorch ./orchestrator/cmd/fakeorch
	$(GOBUILD) -o $(BIN)/mapbots ./mapserver/cmd/mapbots

# The one WebAssembly module of the page (generator, movement, snapshot decoder),
# compressed once here (zopfli, else gzip -9) so the edge serves it as it lies.
page:
	@mkdir -p $(BIN) $(PAGE_GEN)
	GO=$(GO) scripts/page-module.sh $(BIN) '$(LDFLAGS)'
	cp $(BIN)/mapyard.wasm.gz $(PAGE_GEN)/mapyard.wasm.gz
	cp "$(GOROOT)/lib/wasm/wasm_exec.js" $(PAGE_GEN)/wasm_exec.js
	@echo "page: $$(wc -c < $(PAGE_GEN)/mapyard.wasm.gz) bytes of module (gzip)"

# A Docker engine answers, or scripts/docker-engine.sh installs and starts one (Debian,
# as root): `make up` and `make test` need nothing set up by hand.
engine:
	@docker info >/dev/null 2>&1 || scripts/docker-engine.sh

images: build engine
	docker build -q -f Dockerfile.orchestrator --build-arg VERSION=$(VERSION) \
		-t mapyard/orchestrator:latest -t mapyard/orchestrator:$(VERSION) .
	docker build -q -f Dockerfile.map --build-arg VERSION=$(VERSION) \
		-t mapyard/map:latest -t mapyard/map:$(VERSION) .
	docker build -q -f Dockerfile.map --build-arg VERSION=$(VERSION) --build-arg BIN=tagserver \
		--build-arg TITLE="mapyard tag map server" -t mapyard/tag:latest -t mapyard/tag:$(VERSION) .
	@docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^mapyard/.*:latest '

# The Node.js example map, a map in another language, by its recipe: this host's node,
# the libraries it links and the page's module on scratch (scripts/node-map-image.sh).
node-map-image: page engine
	VERSION=$(VERSION) GO=$(GO) WASM_DIR=$(BIN) scripts/node-map-image.sh $(NODE_MAP_IMAGE):$(VERSION) $(NODE_MAP_IMAGE):latest

# The edge is started, or replaced through its handover socket with no connection
# refused, by scripts/edge-up.sh rather than by compose's stop-then-start. compose/tls
# is where a host puts certificate files for the edge (docs/operations.md, "HTTPS").
up: images $(ENV_FILE)
	@test -n "$(COMPOSE)" || { echo "neither 'docker compose' nor 'docker-compose' is installed"; exit 1; }
	@mkdir -p compose/tls compose/maps
	DOCKER_GID=$(DOCKER_GID) $(COMPOSE) $(COMPOSE_ARGS) up -d orchestrator
	DOCKER_GID=$(DOCKER_GID) scripts/edge-up.sh $(COMPOSE) $(COMPOSE_ARGS)
	@scripts/wait-ready.sh $(EDGE_READYZ) 120 $$($(COMPOSE) $(COMPOSE_ARGS) ps -q orchestrator edge)

# Rebuilds the images from the checkout and rolls the running kit onto them, players
# playing: the orchestrator (compose recreates it; the edge keeps the sockets, the maps
# are adopted), the edge (through its handover socket), then every map whose container
# runs another image than its image name names now, upgraded live PARALLEL at a time.
# Prints a report a step: sockets closed, the longest pause and the farthest rollback
# its WATCH watcher players saw, joins refused (docs/operations.md, "Upgrades").
upgrade: images $(ENV_FILE)
	@test -n "$(COMPOSE)" || { echo "neither 'docker compose' nor 'docker-compose' is installed"; exit 1; }
	DOCKER_GID=$(DOCKER_GID) ENV_FILE=$(ENV_FILE) PARALLEL=$(or $(PARALLEL),2) WATCH=$(or $(WATCH),4) \
		JOIN_LOOP=$(or $(JOIN_LOOP),0) scripts/upgrade.sh $(COMPOSE) $(COMPOSE_ARGS)

# compose needs the env file to exist (v1.29 has no optional env_file): an empty one
# means every default.
$(ENV_FILE):
	@printf '# mapyard settings: one VAR=value a line (docs/configuration.md). Empty: every default.\n' > $@

down: $(ENV_FILE)
	@test -n "$(COMPOSE)" || { echo "neither 'docker compose' nor 'docker-compose' is installed"; exit 1; }
	DOCKER_GID=$(DOCKER_GID) $(COMPOSE) $(COMPOSE_ARGS) down
	@$(RM_MAPS)

# Everything `make up` made, data included: the services, the map containers, the data
# volume (database, root secret), the edge's volumes and the map network. Asks first;
# CONFIRM=yes skips the question.
reset: $(ENV_FILE)
	@test -n "$(COMPOSE)" || { echo "neither 'docker compose' nor 'docker-compose' is installed"; exit 1; }
	@if [ "$(CONFIRM)" != yes ]; then \
		printf 'This deletes every character and map state (volume mapyard_mapyard-data), the ACME certificates of the edge (mapyard_mapyard-certs) and the map network $(MAP_NETWORK). Type yes to go on: '; \
		read answer; [ "$$answer" = yes ] || { echo "nothing removed"; exit 1; }; \
	fi
	DOCKER_GID=$(DOCKER_GID) $(COMPOSE) $(COMPOSE_ARGS) down -v
	@$(RM_MAPS)
	@if docker network inspect $(MAP_NETWORK) >/dev/null 2>&1; then \
		docker network rm $(MAP_NETWORK) >/dev/null && echo "removed network $(MAP_NETWORK)" || \
		echo "network $(MAP_NETWORK) kept: containers of another deployment are on it"; fi

# The kit on this engine's Swarm: the orchestrator and the edge as services of the stack
# mapyard, on the manager labelled mapyard.orchestrator=true (this one when no node is),
# every map a service on any node that has its images (scripts/swarm-images.sh). Refuses
# while the compose kit runs here (the two would share the data volume), or while a
# network mapyard-maps the stack did not create is in the way.
up-swarm: images $(ENV_FILE)
	@$(SWARM_MANAGER)
	@if [ -n "$$(docker ps -q --filter label=com.docker.compose.project=$(PROJECT) --filter label=com.docker.compose.service=orchestrator)" ]; then \
		echo "the compose kit (make up) runs on this engine, with the same data volume: make down first"; exit 1; fi
	@ns=$$(docker network inspect -f '{{index .Labels "com.docker.stack.namespace"}}' $(STACK_NETWORK) 2>/dev/null) || exit 0; \
		if [ "$$ns" != $(STACK) ]; then \
			echo "a network $(STACK_NETWORK) the stack did not create exists (an orchestrator run by hand with ORCH_RUNTIME=swarm?): remove its map services and it (docker network rm $(STACK_NETWORK)), then try again"; exit 1; fi
	@self=$$(docker info --format '{{.Swarm.NodeID}}'); \
		labelled=$$(docker node ls -q | xargs docker node inspect --format '{{if eq (index .Spec.Labels "mapyard.orchestrator") "true"}}{{.ID}} {{end}}' | xargs); \
		case "$$labelled" in \
		"") docker node update --label-add mapyard.orchestrator=true $$self >/dev/null && \
			echo "labelled this node ($$self) mapyard.orchestrator=true: the orchestrator and the edge run here";; \
		"$$self") ;; \
		*" "*) echo "nodes $$labelled all carry mapyard.orchestrator=true: keep the label on one (docker node update --label-rm mapyard.orchestrator NODE), since the data volume is one node's"; exit 1;; \
		*) echo "the orchestrator and the edge run on node $$labelled (labelled mapyard.orchestrator=true), not here: DOCKER_GID ($(DOCKER_GID)) must be that node's socket group, and its images that node's";; \
		esac
	DOCKER_GID=$(DOCKER_GID) MAPYARD_VERSION=$(VERSION) MAPYARD_PORT=$(MAPYARD_PORT) \
		docker stack deploy --resolve-image never -c $(STACK_FILE) $(STACK)
	@if [ "$$(docker node ls -q | wc -l)" -gt 1 ]; then \
		echo "maps run on every node: put the images there with scripts/swarm-images.sh (docs/scale-out.md, \"Images on every node\")"; fi
	@if docker node inspect self --format '{{index .Spec.Labels "mapyard.orchestrator"}}' | grep -qx true; then \
		scripts/wait-ready.sh http://127.0.0.1:$(MAPYARD_PORT)/readyz 180; \
	else echo "the edge runs on the labelled node: wait for http://<that node>:$(MAPYARD_PORT)/readyz there"; fi

# Stops the stack and removes the deployment's map services (the data volume is kept):
# the orchestrator first, so that it restarts no map while they go, then the stack, the
# maps, and the stack's overlay network once their tasks have left it.
down-swarm: $(ENV_FILE)
	@$(SWARM_MANAGER)
	@if docker service inspect $(STACK)_orchestrator >/dev/null 2>&1; then \
		echo "stopping the orchestrator"; docker service update --quiet --detach=false --replicas 0 $(STACK)_orchestrator >/dev/null; fi
	@docker stack rm $(STACK) 2>/dev/null || true
	@$(RM_MAP_SERVICES)
	@for _ in $$(seq 1 60); do \
		ns=$$(docker network inspect -f '{{index .Labels "com.docker.stack.namespace"}}' $(STACK_NETWORK) 2>/dev/null) || exit 0; \
		[ "$$ns" = $(STACK) ] || exit 0; \
		docker network rm $(STACK_NETWORK) >/dev/null 2>&1 && { echo "removed network $(STACK_NETWORK)"; exit 0; }; \
		sleep 1; \
	done; echo "network $(STACK_NETWORK) kept: something still uses it (docker network inspect $(STACK_NETWORK))"

test: engine lint images node-map-image test-images test-go test-wasm test-fuzz

# The images as shipped, and the compose file as both compose versions read it (with the
# env file absent, as on a fresh clone: a scratch copy of compose/ without it fails, the
# file `make up` creates passes); the Swarm stack file as `docker stack deploy` reads it
# (docker stack config, where the CLI has it) and as compose reads it.
test-images: images
	scripts/check-images.sh
	@if [ -n "$(COMPOSE)" ]; then scripts/check-compose.sh "$(COMPOSE)" && echo "compose file valid ($(COMPOSE))"; \
		else echo "no compose installed: compose file not checked"; fi
	scripts/check-stack.sh "$(COMPOSE)"

# Tests start the map images by their version tags (the kit's map, tag's for the tests
# of a second game, and the Node.js example's): mapyard/map:latest may be another
# checkout's build on a shared engine. `make test` needs the engine (for the images)
# and node (for test-wasm and the example) anyway, so tests that use them fail here
# instead of skipping.
# promtool checks every binary's metrics and the Prometheus docs; scripts/promtool.sh
# installs it when it is missing, and `scripts/swarm-lab.sh deps` what the Swarm lab's
# tests need (docs/scale-out.md, "The lab"). -timeout: the orchestrator's package plays
# real containers and the page in Chromium; on a loaded host it needs more than go
# test's default 10 minutes.
test-go:
	scripts/promtool.sh
	scripts/swarm-lab.sh deps
	MAPYARD_REQUIRE_DOCKER=1 MAPYARD_TEST_MAP_IMAGE=mapyard/map:$(VERSION) MAPYARD_TEST_TAG_IMAGE=mapyard/tag:$(VERSION) \
		MAPYARD_TEST_ORCH_IMAGE=mapyard/orchestrator:$(VERSION) \
		MAPYARD_TEST_NODE_IMAGE=$(NODE_MAP_IMAGE):$(VERSION) $(GO) test -count=1 -timeout 30m ./...

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

# The conformance kit (docs/map-contract.md, "Conformance") against a map image: this
# checkout's by default, or IMAGE=... (any language; it must be in the local engine).
# ARGS=-json prints a report a program reads.
conform: $(if $(IMAGE),build,images)
	$(BIN)/orchestrator conform --image $(or $(IMAGE),mapyard/map:$(VERSION)) $(ARGS)

# Workload W1 against one map container, with the Colyseus peer on the same machine
# (docs/benchmarks.md). NS, WARMUP and WINDOW (seconds) shorten it for a smoke run:
# make bench-w1 NS=100 WARMUP=3 WINDOW=10. PATHS=edge (or "direct edge") runs the bots
# through the edge and the kit instead of (or besides) straight at the map.
bench-w1: images
	NS="$(or $(NS),100 250 500 1000)" PATHS="$(or $(PATHS),direct)" WARMUP=$(or $(WARMUP),15) \
		WINDOW=$(or $(WINDOW),60) IMAGE=mapyard/map:$(VERSION) scripts/bench-w1.sh

# W1 through the whole path: the kit's orchestrator and edge, W1's map in a container
# with the default limits, the bots joining and playing through the edge; map + edge
# CPU per player against Colyseus in the same run (docs/benchmarks.md).
bench-w1-edge: images
	NS="$(or $(NS),250 500 1000)" PATHS=edge WARMUP=$(or $(WARMUP),15) WINDOW=$(or $(WINDOW),60) \
		IMAGE=mapyard/map:$(VERSION) scripts/bench-w1.sh

# Workload W2, the WebSocket proxy hop: bin/edge beside direct, Go's httputil proxy and
# Debian's nginx (worker_processes 1) in one interleaved run of the wsproxy peer harness,
# from a writable copy of it (PEER, default /tmp/peers/wsproxy; docs/benchmarks.md).
# REPS, DUR, BCAST_DUR, IDLE_WAIT and RETRIES shorten it: make bench-w2 REPS=1 DUR=3.
# TLS=1 runs it over TLS beside nginx over TLS, with full handshakes per core after it.
bench-w2: build
	REPS=$(or $(REPS),3) DUR=$(or $(DUR),10) BCAST_DUR=$(or $(BCAST_DUR),15) IDLE_WAIT=$(or $(IDLE_WAIT),15) \
		RETRIES=$(or $(RETRIES),1) scripts/bench-w2.sh

# Workload W3, a crowd in one spot, through the edge: the kit's orchestrator and edge
# binaries with the default map in a container of this checkout's image
# (docs/benchmarks.md); N = 0 is the probe alone. NS, MODES, WARMUP and WINDOW shorten
# it for a smoke run: make bench-w3 NS="0 250" MODES=idle WARMUP=5 WINDOW=15
bench-w3: images
	NS="$(or $(NS),0 250 500 1000 2000)" MODES="$(or $(MODES),idle move)" WARMUP=$(or $(WARMUP),15) \
		WINDOW=$(or $(WINDOW),60) IMAGE=mapyard/map:$(VERSION) scripts/bench-w3.sh

# An edge replacement under load: N bots that resume by themselves, newcomers joining
# at JOIN_LOOP a second, and a second edge taking the port over AT s into the window
# (docs/benchmarks.md). make bench-handover N=100 WINDOW=10 for a smoke run.
bench-handover: images
	N=$(or $(N),1000) JOIN_LOOP=$(or $(JOIN_LOOP),20) WARMUP=$(or $(WARMUP),5) WINDOW=$(or $(WINDOW),20) \
		AT=$(or $(AT),5) MODE=$(or $(MODE),idle) IMAGE=mapyard/map:$(VERSION) scripts/bench-handover.sh

# A live map upgrade under load beside a restart of the same map: N W1 bots through the
# edge, the map upgraded to a second tag of its image, then restarted; sockets closed,
# pauses, rollbacks and the whole upgrade's time, medians of REPS interleaved runs
# (docs/benchmarks.md). make bench-upgrade NS=50 REPS=1 for a smoke run.
bench-upgrade: images
	NS="$(or $(NS),200 1000)" REPS=$(or $(REPS),3) JOIN_LOOP=$(or $(JOIN_LOOP),10) WARMUP=$(or $(WARMUP),10) \
		MODE=$(or $(MODE),move) IMAGE=mapyard/map:$(VERSION) scripts/bench-upgrade.sh

# The Swarm figures (docs/scale-out.md) on the two-node lab (scripts/swarm-lab.sh): spawn
# against a raw service create, handouts, node loss with the default settings, W1 with
# the map on the other node. BENCH narrows it (e.g. BENCH=SwarmNodeLoss); N, PLAYERS,
# WARMUP and WINDOW tune it (docs/benchmarks/scripts.md).
bench-swarm: images
	@mkdir -p bench-results
	scripts/swarm-lab.sh deps
	MAPYARD_REQUIRE_DOCKER=1 MAPYARD_TEST_MAP_IMAGE=mapyard/map:$(VERSION) MAPYARD_TEST_ORCH_IMAGE=mapyard/orchestrator:$(VERSION) \
		$(GO) test -count=1 -run '^$$' -bench '$(or $(BENCH),Swarm)' -benchtime 1x -timeout 60m -v ./orchestrator/cmd/orchestrator \
		| tee bench-results/swarm-$$(date -u +%Y%m%dT%H%M%SZ).txt

# The soak (docs/operations.md, "Soak"): the kit under bots, portals, pickups, joins,
# leaves and dropped sockets for DURATION (10 minutes by default; make test runs 3),
# with a seeded fault schedule (SEED reproduces one) and a sample every 10 s; the
# report goes to bench-results/soak-<time>/. BOTS is the W1 bots per map (20).
soak: images
	@mkdir -p bench-results
	@log=bench-results/soak-$$(date -u +%Y%m%dT%H%M%SZ).log; echo "soak: the whole test log goes to $$log"; \
	MAPYARD_REQUIRE_DOCKER=1 MAPYARD_TEST_MAP_IMAGE=mapyard/map:$(VERSION) MAPYARD_TEST_TAG_IMAGE=mapyard/tag:$(VERSION) \
		MAPYARD_SOAK_DURATION=$(or $(DURATION),10m) MAPYARD_SOAK_BOTS=$(or $(BOTS),20) $(if $(SEED),MAPYARD_SOAK_SEED=$(SEED)) \
		$(GO) test -count=1 -run '^TestSoak$$' -timeout 48h -v ./orchestrator/cmd/orchestrator > $$log 2>&1; rc=$$?; \
	grep -E 'soak: |^(--- |ok |FAIL|PASS)' $$log; exit $$rc

# The benchmark table (docs/benchmarks.md): figure, target, measured, ratio for every
# figure of scripts/bench/figures.tsv, the micro-benchmarks measured now (a few
# minutes), W1, W2 and W3 as their latest recorded results. Every other benchmark:
# go test -run='^$$' -bench=. ./...
bench: images
	@mkdir -p bench-results
	MAPYARD_TEST_MAP_IMAGE=mapyard/map:$(VERSION) scripts/bench-table.sh | tee bench-results/table-$$(date -u +%Y%m%dT%H%M%SZ).md

# The page's golden screenshots (orchestrator/cmd/orchestrator/testdata/page/), drawn
# again by Chromium from this checkout against a map container of its image; look at
# them (git diff shows which changed) before committing.
goldens: images
	MAPYARD_UPDATE_GOLDENS=1 MAPYARD_REQUIRE_DOCKER=1 MAPYARD_TEST_MAP_IMAGE=mapyard/map:$(VERSION) \
		$(GO) test -count=1 -run '^TestPage_Screenshots$$' ./orchestrator/cmd/orchestrator

# README's three screenshots (docs/img/: the menu, the default map with other players
# and NPCs, the inventory), drawn by Chromium from the real page against map
# containers of this checkout's image.
readme-shots: images
	MAPYARD_README_SHOTS=$(CURDIR)/docs/img MAPYARD_REQUIRE_DOCKER=1 MAPYARD_TEST_MAP_IMAGE=mapyard/map:$(VERSION) \
		$(GO) test -count=1 -run '^TestPage_ReadmeScreenshots$$' -v ./orchestrator/cmd/orchestrator

# Generated documentation: docs/configuration.md from the configuration structs (a test
# fails when they disagree).
docs:
	$(GO) generate ./orchestrator/cmd/confdoc

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf $(BIN) $(PAGE_GEN)
