# redcrawl — see README.md.
GO      ?= go
BIN     := bin
PKGS    := ./...
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all build harness test test-race bench soak demo docs services test-services vet fmt clean release test-pi

all: build

## build: bin/master and bin/slave, pure Go like the release binaries (no libc mapped: about 1.8 MiB less slave RSS)
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/master ./master
	CGO_ENABLED=0 $(GO) build -o $(BIN)/slave ./slave

## harness: the programs of make demo and make bench, bin/demo and bin/bench (internal/harness/cmd), and the bench's
## colly slave bin/collybench; bin/master links none of the harness
harness:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/demo ./internal/harness/cmd/demo
	CGO_ENABLED=0 $(GO) build -o $(BIN)/bench ./internal/harness/cmd/bench
	CGO_ENABLED=0 $(GO) build -o $(BIN)/collybench ./internal/harness/benchsuite/collybench

## services: make sure Redis and MariaDB are reachable (installs/starts them if not)
services:
	@bash .ci/services

## test-services: services, and Chromium (rendering tests) and qemu-user-static (the Raspberry Pi test)
test-services:
	@bash .ci/services chromium qemu

## test: the whole suite against the real Redis and MariaDB
test: test-services
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -p 3 -timeout 20m $(PKGS)

## test-race: the suite under the race detector
test-race: test-services
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

## bench: bin/bench (internal/harness/cmd/bench), the crawl benchmark against plain colly (1, 2 and 4 slave processes, 4 rounds alternating their order, medians; results/;
## beside them one slave running colly callbacks, slave/collyslave, with its pages/s and CPU per page against the stock slave's, and the
## sizes of the arm64 builds of the slave and of the colly example), the same with a 20 ms server latency (results/latency/) and a small
## 3,000-page site at 20 ms (results/small/: the start-up regime;
## pages/s to 99% of the site, ramp, last fetch → finished), the same small site with a URL that always answers 503 (Retry-After: 2)
## on two of its hosts (results/failing/), slaves of the work API against direct ones round by round (results/api/, 1 and 4 slaves),
## then the Go benchmarks (with BenchmarkIdle: idle Redis commands/s of a master and 4 slaves, wake-up p50/p99, ~30 s; BenchmarkShardedCluster and BenchmarkShardedMemory: S=1 vs S=3 on a 3-node cluster, bytes per URL S=1 vs S=4; ~15-40 s at 1x;
## BenchmarkSeedMemory: Redis bytes per seeded URL at 100k and 1M seeds, ~1-2 min), and the calendar trap under the default caps;
## last the broad crawl (results/broad/: 50,000 named hosts × 4 pages through a DNS server on loopback, 1, 4 and 16 slaves of 64
## fetches in total and 100 slaves of one, against 20 hosts with as many pages: pages/s, Redis CPU and bytes a host, claim p50/p99,
## idle commands/s, all-in CPU a page; and plain colly on both sites, the peer's broad / 20-host ratio; ~20-35 min)
bench: services build harness
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(RELEASE_FLAGS) -o $(BIN)/arm64/slave ./slave
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(RELEASE_FLAGS) -o $(BIN)/arm64/collyshop ./slave/examples/collyshop
	$(BIN)/bench --config config.yaml --slave-binary $(BIN)/slave --out results --rounds 4 \
		--colly-slave-binary $(BIN)/collybench --size "slave, linux/arm64=$(BIN)/arm64/slave" \
		--size "collyshop (a colly slave: slave/examples/collyshop), linux/arm64=$(BIN)/arm64/collyshop"
	$(BIN)/bench --config config.yaml --slave-binary $(BIN)/slave --out results/small --hosts 10 --pages 300 --latency 20ms --slave-counts 1,2 --rounds 4
	$(BIN)/bench --config config.yaml --slave-binary $(BIN)/slave --out results/failing --hosts 10 --pages 300 --latency 20ms --failing-hosts 2 --slave-counts 1,2 --rounds 2
	$(BIN)/bench --config config.yaml --slave-binary $(BIN)/slave --out results/latency --latency 20ms --slave-counts 1,2,4 --rounds 2
	$(BIN)/bench --config config.yaml --slave-binary $(BIN)/slave --out results/api --slave-counts 1,4 --rounds 3 --api
	$(GO) test -run '^$$' -bench . -benchtime 1x ./master/masterd/ ./internal/e2e/ ./shared/frontier/
	$(GO) test -run '^$$' -bench CalendarTrap -benchtime 1x ./slave/slaved/
	$(GO) test -run '^$$' -bench . -benchmem ./shared/robots/ ./shared/urlx/ ./slave/content/ ./slave/dnscache/ ./slave/warc/ ./slave/session/ ./slave/banker/ ./shared/rules/ ./shared/extract/ ./slave/render/
	$(BIN)/bench --config config.yaml --slave-binary $(BIN)/slave --out results/broad --broad --broad-many 100 --broad-colly

## soak: TestSoak (internal/e2e/faults, internal/harness/soak) for SOAK_DURATION (1h) from SOAK_SEED (1): crawls of the test site, on one
## Redis and on a Redis Cluster in turn, under random faults (slaves killed, frozen, partitioned; the master killed; MySQL cut and
## refusing writes; Redis killed and out of memory; a cluster failover; the API slave restarted; a slave's clock minutes off), each
## crawl's invariants checked; prints one line of figures (faults of each kind, pages, re-fetches, politeness gaps, peak RSS), also
## in results/soak.txt; go test runs it for 3 minutes
SOAK_DURATION ?= 1h
SOAK_SEED     ?= 1
SOAK_TIMEOUT  ?= 3h
soak: services
	@mkdir -p results
	@rm -f results/soak.txt
	REDCRAWL_SOAK_DURATION=$(SOAK_DURATION) REDCRAWL_SOAK_SEED=$(SOAK_SEED) REDCRAWL_SOAK_OUT=$(CURDIR)/results/soak.txt \
		$(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' ./internal/e2e/faults/
	@cat results/soak.txt

## demo: bin/demo (internal/harness/cmd/demo) crawls a built-in demo site on loopback with a master and two slaves, then removes its crawl (needs only Redis and MariaDB;
## Chromium, when installed, renders the demo shop)
demo: services build
	CGO_ENABLED=0 $(GO) build -o $(BIN)/demo ./internal/harness/cmd/demo
	$(BIN)/demo --config config.yaml --slaves 2

## docs: regenerate the references made from the code, docs/cli.md (the commands' -h) and docs/configuration.md
## (the config's keys); the tests that compare them with the code fail, naming this target, when they drift
docs:
	REDCRAWL_UPDATE_DOCS=1 $(GO) test -count=1 -run '^(TestCLIReference|TestConfigReference)$$' ./master/ ./slave/ ./shared/config/

## release: pure-Go static binaries for amd64, arm64 and armv7 (Raspberry Pi) in bin/release, one
## tarball per target (binaries, config.example.yaml, deploy/, docs) and SHA256SUMS (deploy/release.sh);
## VERSION=... overrides git describe
RELEASE_FLAGS := -trimpath -ldflags "-s -w"
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
release:
	@mkdir -p $(BIN)/release
	@set -e; for t in amd64:amd64: arm64:arm64: armv7:arm:7; do \
		name=$${t%%:*}; rest=$${t#*:}; arch=$${rest%%:*}; arm=$${rest#*:}; \
		for cmd in slave master; do \
			echo "release: $(BIN)/release/$$cmd-linux-$$name"; \
			CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOARM=$$arm \
				$(GO) build $(RELEASE_FLAGS) -o $(BIN)/release/$$cmd-linux-$$name ./$$cmd; \
		done; \
	done
	bash deploy/release.sh '$(VERSION)' $(BIN)/release

## test-pi: the arm64 slave under qemu-user-static crawls the demo site (slave/pi)
test-pi: test-services
	$(GO) test -count=1 -v -timeout 10m ./slave/pi/

fmt:
	gofmt -w master slave shared internal

clean:
	rm -rf $(BIN) results
