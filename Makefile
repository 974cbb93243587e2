# nri-rs build, test and demo entry points. `make demo` and `make test` work
# from a bare clone once the toolchains are installed (.ci/run does that).

CARGO      ?= cargo
GO         ?= go
CBINDGEN_VERSION := 0.29.4
# Pinned tools (cbindgen, cargo-deny, cargo-fuzz) are installed here; CI
# points it outside the clone so that a machine keeps them between runs.
NRI_TOOLS  ?= $(CURDIR)/build/tools
TOOLS      := $(NRI_TOOLS)
CBINDGEN   := $(TOOLS)/bin/cbindgen
GO_TEST_FLAGS ?= -count=1
# The Go wrapper (go/adaptation) links the Rust staticlib through cgo.
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
NRI_LIB_DIR ?= $(TARGET_DIR)/debug
# The C ABI crate owns the header; cgo finds it and libnri.a through these.
NRI_INCLUDE_DIR := $(CURDIR)/crates/nri-capi/include
# go/adaptation and go/generate find libnri.a and nri.h through pkg-config
# (`#cgo pkg-config: nri`); inside the repository through the uninstalled
# nri.pc that `make pkgconfig` writes next to the library.
export PKG_CONFIG_PATH := $(NRI_LIB_DIR)/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
# Go's build cache does not see a rebuilt libnri.a either (it keys cgo on
# flags and sources, not on the libraries linked), so it would link a test
# binary against the core it linked last. The library's mtime and size in
# CGO_CFLAGS make every rebuild of it a new key; `=` re-reads them for
# each command, after earlier steps rebuilt the library. A recursive make
# (bench, soak) inherits the exported flags: its stamp replaces theirs.
NRI_CGO_CFLAGS := $(filter-out -DNRI_LIB_STAMP=%,$(or $(CGO_CFLAGS),-O2 -g))
export CGO_CFLAGS = $(NRI_CGO_CFLAGS) -DNRI_LIB_STAMP=$(shell stat -c %Y.%s $(NRI_LIB_DIR)/libnri.a 2>/dev/null || echo none)
# Go's build cache does not see pkg-config's answer, so a package built
# against the debug library would be reused to link against the release
# one (make bench). CGO_LDFLAGS is part of the cache key: naming the
# library's directory here keeps the two apart. (-L as nri.pc says.)
export CGO_LDFLAGS := -L$(NRI_LIB_DIR) $(CGO_LDFLAGS)
NRI_VERSION := $(shell sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)

# The release libnri.a is built as a staticlib alone: cargo skips LTO for
# a crate that is also an rlib (nri-capi is one for the fuzz targets), and
# the release profile's whole-program LTO makes the library a third of its
# size without it and the core faster (docs/PERFORMANCE.md, "The release
# profile"). Every release build of the library goes through this.
# NRI_FEATURES adds nri-capi's cargo features: compiled-wasm, the library's
# own WASM compiler (wasmtime, Cranelift; off by default, see
# docs/INTEGRATION.md), e.g. `make release install NRI_FEATURES=compiled-wasm`.
NRI_FEATURES ?=
RELEASE_LIB = $(CARGO) rustc --release -p nri-capi --lib --crate-type staticlib $(if $(NRI_FEATURES),--features "$(NRI_FEATURES)")
COMPILED_WASM = $(filter compiled-wasm,$(NRI_FEATURES))
# The Rust bench plugin is built as plugins ship (plugins/deploy: the
# plugin profile, linked statically) and as the Go bench plugin is built
# (CGO_ENABLED=0), so that the two stubs' footprints compare like with like
# rather than one program against another plus the dynamic loader and
# shared libc.
BENCH_PLUGIN = $(CARGO) rustc --profile plugin -p nri-test-tools --bin nri-bench-plugin -- -C target-feature=+crt-static
BENCH_RUST_PLUGIN = $(TARGET_DIR)/plugin/nri-bench-plugin

LINT_PHONY := lint lint-rust lint-go lint-sh lint-docs lint-deny
.PHONY: $(LINT_PHONY) dist-unpack size size-daemons test-size fuzz fuzz-corpus provenance pkgconfig release install uninstall check dist build-against test-install all build demo demo-go example test test-rust test-go test-c conformance upstream-check e2e e2e-containerd e2e-crio e2e-moby bench bench-run soak soak-run header check-header fmt clean

all: build

## build: every crate (libnri.a among them), the sample plugins and test tools
build:
	$(CARGO) build --workspace
	@$(MAKE) --no-print-directory pkgconfig

## pkgconfig: nri.pc for the library in NRI_LIB_DIR, as it lies in the tree
pkgconfig:
	@mkdir -p $(NRI_LIB_DIR)/pkgconfig
	@$(INSTALL_SH) pc $(NRI_LIB_DIR) $(NRI_LIB_DIR) $(NRI_INCLUDE_DIR) > $(NRI_LIB_DIR)/pkgconfig/nri.pc

## release: build, as a user, everything `make install` installs: the
## release libnri.a (and with NRI_FEATURES=compiled-wasm nri-wasm-compile).
## The header, nri.proto, the overlay writer and its Go sources are files
## of the tree. docs/PACKAGING.md.
release:
	$(RELEASE_LIB) --locked
	@# Release, with nri-capi selected too so that features resolve as
	@# for the library: the tool then links the very dependencies the
	@# library was built from (nothing is compiled again), and its engine
	@# is the library's, which the files it writes need in order to load.
	$(if $(COMPILED_WASM),$(CARGO) build --release --locked -p nri-wasm -p nri-capi --features "$(NRI_FEATURES)" --bin nri-wasm-compile)

## install: copy what `make release` built, and nothing else, under
## DESTDIR/PREFIX (run as root; fails if something was not built):
## libnri.a (without debug sections), nri.h, nri.pc, nri.proto, the
## overlay writer nri-rs-overlay with the go/adaptation sources it maps,
## and with NRI_FEATURES=compiled-wasm nri-wasm-compile and its man page,
## which a node's setup runs so that the runtime runs its WASM plugins
## compiled rather than on wazero. `pkg-config --cflags --libs nri` then
## has what a C or cgo build needs; see docs/PACKAGING.md.
## uninstall: remove what install put (the list it wrote).
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR  ?= $(DATADIR)/man
INSTALL_SH = DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" LIBDIR="$(LIBDIR)" \
  INCLUDEDIR="$(INCLUDEDIR)" DATADIR="$(DATADIR)" MANDIR="$(MANDIR)" TARGET_DIR="$(TARGET_DIR)" \
  COMPILED_WASM=$(if $(COMPILED_WASM),1,0) NRI_FEATURES="$(NRI_FEATURES)" NRI_VERSION="$(NRI_VERSION)" \
  NRI_PC_LIBS="$(NRI_PC_LIBS)" packaging/install.sh
install:
	@$(INSTALL_SH) install

uninstall:
	@$(INSTALL_SH) uninstall

## check: the tests that need neither root nor network (Rust, Go, C);
## from the tarball of `make dist` they run offline. docs/PACKAGING.md.
check: test-rust test-go test-c

## dist: build/dist/nri-rs-VERSION.tar.gz and .sha256: the working tree as
## git sees it, with vendored crates and Go modules (packaging/dist.sh)
DIST_DIR := $(CURDIR)/build/dist
DIST_NAME := nri-rs-$(NRI_VERSION)
DIST_TARBALL := $(DIST_DIR)/$(DIST_NAME).tar.gz
dist:
	CARGO="$(CARGO)" GO="$(GO)" packaging/dist.sh $(NRI_VERSION) $(DIST_DIR)

## demo: the Rust adaptation core hosting Rust plugins, driving one pod and container
demo: build
	$(TARGET_DIR)/debug/nri-rs-demo $(TARGET_DIR)/debug

## demo-go: the same plugins under upstream's Go runtime adaptation
demo-go: build
	cd go/tests && $(GO) run ./cmd/nri-demo -bin $(TARGET_DIR)/debug

## example: the Go example a runtime author reads first (go/example)
example: build
	cd go && $(GO) run ./example -plugin $(NRI_LIB_DIR)/nri-logger

## test: every test (Rust unit + integration, Go wrapper, wire and interop,
## upstream's adaptation suite, header, C tests of the ABI, containerd and
## CRI-O built with nri-rs running their own NRI end-to-end tests), on the
## tarball of `make dist`: unpacked into build/dist-test, `make check`'s
## steps run there offline, then the steps that need the network or root
## run there too, on the same build (nothing is compiled twice).
## The steps run in this order, each timed, so that a slow CI run says
## which step took the time.
DIST_TEST := $(CURDIR)/build/dist-test
DIST_SRC := $(DIST_TEST)/$(DIST_NAME)
# A step in the unpacked tarball: its own target directory, whatever
# CARGO_TARGET_DIR or TARGET_DIR say here; the e2e builds' cache stays in
# this tree's build/ (the unpacked tree is replaced by each run).
# The flags this Makefile exports for the tree's library are left out.
IN_DIST = env -u NRI_LIB_DIR -u PKG_CONFIG_PATH -u CGO_CFLAGS -u CGO_LDFLAGS CARGO_TARGET_DIR=$(DIST_SRC)/target NRI_TOOLS=$(TOOLS) \
  E2E_BUILD=$(or $(E2E_BUILD),$(CURDIR)/build/e2e) \
  $(MAKE) --no-print-directory -C $(DIST_SRC) TARGET_DIR=$(DIST_SRC)/target
# No network: cargo offline (vendor/ through .cargo/config.toml), Go from
# vendor/ with no module proxy and no toolchain download.
OFFLINE_ENV := CARGO_NET_OFFLINE=true GOPROXY=off GOTOOLCHAIN=local GOFLAGS='-mod=vendor -buildvcs=false'
# check's steps (offline:) and the rest (dist:) in the unpacked tarball.
TEST_STEPS := check-header provenance dist dist-unpack \
  offline:test-rust offline:test-go offline:test-c \
  dist:build-against dist:conformance dist:test-size dist:test-install dist:e2e
test:
	rm -rf $(DIST_TEST)
	@times=""; for step in $(TEST_STEPS); do \
	  name=$${step#*:}; \
	  start=$$(date +%s); \
	  case $$step in \
	    offline:*) env $(OFFLINE_ENV) $(IN_DIST) $$name;; \
	    dist:*) $(IN_DIST) $$name;; \
	    *) $(MAKE) --no-print-directory $$name;; \
	  esac; \
	  rc=$$?; \
	  took=$$(( $$(date +%s) - start )); \
	  if [ $$rc -ne 0 ]; then \
	    echo "make test: $$name failed after $$took s (before it:$$times)"; \
	    exit 1; \
	  fi; \
	  echo "make test: $$name took $$took s"; \
	  times="$$times $$name $${took}s"; \
	done; \
	echo "make test: step times:$$times"; \
	echo "make test: $(DIST_TEST) takes $$(du -sh $(DIST_TEST) | cut -f1)"

## dist-unpack: the tarball of `make dist`, checked against its .sha256 and
## unpacked into build/dist-test (the previous one removed)
dist-unpack:
	rm -rf $(DIST_TEST)
	cd $(DIST_DIR) && sha256sum --quiet -c $(DIST_NAME).tar.gz.sha256
	mkdir -p $(DIST_TEST)
	tar -xzf $(DIST_TARBALL) -C $(DIST_TEST)

# The workspace's tests build the core without its compiled-wasm feature,
# as libnri.a is by default; the core's WASM tests run again with it (only
# nri-runtime and that test are compiled again: nri-wasm's own tests ran
# with the workspace's), so both configurations are tested without a
# second libnri.a.
test-rust:
	$(CARGO) test --workspace
	$(CARGO) test -p nri-runtime --features compiled-wasm --test adaptation -- wasm::
	@$(MAKE) --no-print-directory fuzz-corpus

## fuzz-corpus: every fuzz target's function over its committed corpus
## (fuzz/corpus), on stable Rust and without libFuzzer; part of `make test`.
## It shares the workspace's target directory, so after `cargo test
## --workspace` only the crates whose features differ are compiled again.
fuzz-corpus:
	$(CARGO) test --manifest-path fuzz/Cargo.toml --locked --no-default-features \
	  --target-dir $(TARGET_DIR)

## fuzz: the fuzz targets of fuzz/ (cargo-fuzz, libFuzzer; needs a nightly
## toolchain), one after another, FUZZ_SECONDS each (default 60); fails at
## the first crash, whose input lands in fuzz/artifacts/<target>/. Inputs
## found go to build/fuzz/corpus, the committed seeds are only read.
## FUZZ_TARGETS picks targets, FUZZ_FLAGS adds libFuzzer flags.
CARGO_FUZZ_VERSION := 0.13.2
CARGO_FUZZ := $(TOOLS)/bin/cargo-fuzz
CARGO_NIGHTLY ?= cargo +nightly
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= mux_frames mux_stream sync_split decode merge validator validator_yaml capi
FUZZ_FLAGS ?=
FUZZ_CORPUS := $(CURDIR)/build/fuzz/corpus
fuzz: $(CARGO_FUZZ)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_CORPUS)/$$t && \
	  echo "fuzz: $$t for $(FUZZ_SECONDS)s" && \
	  (cd fuzz && PATH="$(TOOLS)/bin:$$PATH" $(CARGO_NIGHTLY) fuzz run $$t \
	    $(FUZZ_CORPUS)/$$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 $(FUZZ_FLAGS)) || exit 1; \
	done

$(CARGO_FUZZ):
	$(CARGO) install --locked --root $(TOOLS) cargo-fuzz --version $(CARGO_FUZZ_VERSION)

## provenance: fail when our prose or files repeat upstream NRI's (docs/PROVENANCE.md)
provenance:
	tests/provenance.sh

## lint: what CI checks before `make test`: Rust formatting and clippy
## (warnings are errors), the rust-version, the crates' layering and that
## libnri.a's dependencies install no signal handler in their host, gofmt
## and go vet, shellcheck on every script, links of the docs, and
## cargo-deny (licences, duplicate versions, sources; advisories when the
## RustSec database is reachable)
CARGO_DENY_VERSION := 0.20.2
CARGO_DENY := $(TOOLS)/bin/cargo-deny
lint: lint-rust lint-go lint-sh lint-docs lint-deny

# clippy's incompatible_msrv lint checks our code against the workspace's
# rust-version; tests/lint/msrv.sh checks the locked dependencies against it.
lint-rust:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	tests/lint/msrv.sh
	tests/lint/layers.sh
	tests/lint/host-signals.sh

# go vet type-checks the cgo packages, which needs nri.pc (not the library).
lint-go: pkgconfig
	tests/lint/go.sh

lint-sh:
	tests/lint/shellcheck.sh

lint-docs:
	tests/lint/docs.sh

lint-deny: $(CARGO_DENY)
	CARGO_DENY=$(CARGO_DENY) tests/lint/deny.sh

$(CARGO_DENY):
	$(CARGO) install --locked --root $(TOOLS) cargo-deny --version $(CARGO_DENY_VERSION)

# The Go tests drive the Rust binaries and staticlib built by `build`
# (wherever CARGO_TARGET_DIR puts them); cgocheck2 checks every pointer
# that crosses into C. Two Go modules: go (the library) and go/tests (the
# programs that test, compare and measure it, with their own dependencies);
# `./...` stops at a module boundary, so each is vetted and tested.
GO_MODULES := go go/tests
# The upstream releases go/adaptation must build against (build-against.sh
# checks it built exactly that one, and runs its release-neutral tests).
BUILD_AGAINST_VERSIONS := v0.10.0 v0.11.0 v0.12.0 v0.12.1 v0.12.2 v0.12.3 v0.12.4 v0.12.5
GO_TEST_BINS := NRI_BENCH_BIN=$(TARGET_DIR)/debug NRI_RS_BIN_DIR=$(TARGET_DIR)/debug \
  NRI_RS_INTEROP_PLUGIN=$(TARGET_DIR)/debug/nri-interop-plugin \
  NRI_RS_LOGGER_PLUGIN=$(TARGET_DIR)/debug/nri-logger NRI_WIRE_ECHO=$(TARGET_DIR)/debug/nri-wire-echo
test-go: build
	for m in $(GO_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	for m in $(GO_MODULES); do \
	  (cd $$m && $(GO_TEST_BINS) GOEXPERIMENT=cgocheck2 $(GO) test $(GO_TEST_FLAGS) -race ./...) || exit 1; \
	done
	@# Every callback from the core collects garbage first (nri_debug_gc):
	@# a Go value the core uses that nothing keeps alive fails here.
	cd go && $(GO_TEST_BINS) $(GO) test $(GO_TEST_FLAGS) -count=1 -tags nri_debug_gc ./adaptation/
	@# The WASM tests skip themselves under -race, which makes wazero's
	@# compiler take minutes per module: run them without it.
	cd go/tests && $(GO_TEST_BINS) $(GO) test $(GO_TEST_FLAGS) -count=1 ./wasm/
	cd go/tests && $(GO_TEST_BINS) $(GO) test $(GO_TEST_FLAGS) -count=1 -run '^TestSmokeWasm$$' ./bench/
	cd go && $(GO_TEST_BINS) $(GO) test $(GO_TEST_FLAGS) -count=1 -run '^TestWasmEngine' ./adaptation/
	@# Upstream's nri_no_wasm build tag, honoured: no lent engine, no WASM.
	cd go && $(GO) vet -tags nri_no_wasm ./adaptation/
	cd go && $(GO_TEST_BINS) $(GO) test $(GO_TEST_FLAGS) -count=1 -tags nri_no_wasm -run '^TestNoWasmTag' ./adaptation/
	@# The spec generator's differential counts (the test passed above).
	cd go && GOEXPERIMENT=cgocheck2 $(GO) test -race -count=1 -run '^TestDifferential$$' -v ./generate/ | grep '^spec generator'

## build-against: go/adaptation built against each upstream release it
## supports, in a scratch module (needs those releases in the Go module
## cache or the module proxy: part of `make test`, not of `make check`)
build-against: build
	for v in $(BUILD_AGAINST_VERSIONS); do tests/conformance/build-against.sh $$v || exit 1; done

## test-c: the C tests of include/nri.h (tests/c), with cmocka, against the
## release staticlib: under valgrind, then built with ASan+UBSan
# The C tests link libnri.a with exactly the native libraries rustc names
# for it; tests/c/check-static-libs.sh fails when they differ. The Rust
# plugins they run come from `build` (debug), as for the Go tests.
NRI_NATIVE_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
# nri.pc's list: the same but libgcc_s, which the compiler driver adds (see
# crates/nri-capi/nri.pc.in).
NRI_PC_LIBS := $(filter-out -lgcc_s,$(NRI_NATIVE_LIBS))
test-c: build
	$(RELEASE_LIB)
	CARGO="$(CARGO)" tests/c/check-static-libs.sh "$(NRI_NATIVE_LIBS)"
	tests/c/check-exports.sh $(NRI_INCLUDE_DIR)/nri.h tests/c
	NRI_COMPILED_WASM=$(if $(COMPILED_WASM),1,0) $(MAKE) -C tests/c run NRI_LIB=$(TARGET_DIR)/release/libnri.a \
	  NRI_BIN_DIR=$(TARGET_DIR)/debug NRI_NATIVE_LIBS="$(NRI_NATIVE_LIBS)" \
	  BUILD=$(CURDIR)/build/c

## test-size: fail when a Go runtime's binary grows by more than SIZE_LIMIT_MB
## (10^6 bytes) on go/adaptation over upstream's pkg/adaptation: a small host
## built both ways, stripped, linking the release libnri.a that test-c built
## (tests/size/report.py; a size is not a timing, so this is stable).
## size: the same, written to docs/size.json and INTEGRATION.md's table.
# The target is 5 MB; the default build is at 7.7 MB, which
# this limit holds it to until the core itself shrinks (INTEGRATION.md,
# "What a runtime's binary gains and costs", says where the rest is).
SIZE_LIMIT_MB ?= 8.0
SIZE_REPORT = tests/size/report.py --lib-dir $(TARGET_DIR)/release --limit-mb $(SIZE_LIMIT_MB) \
  --features "$(or $(NRI_FEATURES),default features)"
test-size:
	$(RELEASE_LIB)
	@$(MAKE) --no-print-directory pkgconfig NRI_LIB_DIR=$(TARGET_DIR)/release
	$(SIZE_REPORT) --json $(CURDIR)/build/size/size.json

size:
	$(RELEASE_LIB)
	@$(MAKE) --no-print-directory pkgconfig NRI_LIB_DIR=$(TARGET_DIR)/release
	$(SIZE_REPORT) --json docs/size.json --doc docs/INTEGRATION.md

## size-daemons: what containerd's (static) and CRI-O's daemons grow by,
## each built stock and with nri-rs as the e2e builds it, stripped: into
## docs/size.json ("daemons") and INTEGRATION.md's table, which `make size`
## keeps (tests/size/daemons.sh; network, minutes; not part of `make test`)
size-daemons: release
	tests/size/daemons.sh

## test-install: nri-rs used from outside the repository: `make install`
## into a temporary prefix, then a Go program on go/adaptation built with
## only PKG_CONFIG_PATH, dynamic and static, run with a real plugin; and
## the template plugin built as a crate of its own on the packaged crates
test-install: build release
	tests/install/outside.sh $(TARGET_DIR)/debug/nri-logger
	CARGO="$(CARGO)" tests/install/plugin-outside.sh

## conformance: upstream's own pkg/adaptation suite of each release from
## v0.10.0 to v0.12.5 against go/adaptation, judged by
## tests/conformance/known-differences.txt; one report line per release
conformance: build
	tests/conformance/run.sh
	tests/conformance/stub-against.sh $(TARGET_DIR)/debug

## upstream-check: for each upstream NRI release newer than the newest
## conformance covers (module proxy), its suite and a build of
## go/adaptation against it; a summary (not part of `make test`)
upstream-check: build
	tests/conformance/upstream-check.sh

## e2e: containerd and CRI-O built with nri-rs, running their own NRI e2e tests
## and critest's NRI specs (root; docs/INTEGRATION.md). E2E_STOCK=1 runs the
## stock daemons instead; E2E_CRITEST=0 leaves critest out.
E2E_STOCK ?= 0
e2e: e2e-containerd e2e-crio

e2e-containerd: release
	E2E_STOCK=$(E2E_STOCK) tests/e2e/containerd.sh

e2e-crio: release
	E2E_STOCK=$(E2E_STOCK) tests/e2e/crio.sh

## e2e-moby: Docker Engine (moby) built with nri-rs, running moby's NRI unit
## and integration tests; both flavours, stock dockerd first, unless
## E2E_STOCK is given (root; docs/INTEGRATION.md). Not part of `make test`.
e2e-moby: release
	$(if $(filter command line environment,$(origin E2E_STOCK)),E2E_STOCK=$(E2E_STOCK)) tests/e2e/moby.sh

## bench: upstream Go NRI and nri-rs side by side (go/tests/bench): writes
## docs/performance.json, docs/PERFORMANCE.md and docs/performance.png. Takes
## a while; run it on an otherwise idle machine. BENCH_FLAGS adds flags
## (e.g. BENCH_FLAGS="-rounds 2 -ops 500 -v"); BENCH_FLAGS="-v -cases
## '^storm-' -merge" runs only the pod-start storm and puts its figures into
## the existing results, keeping the other cases'. `make test` runs a smoke
## version of it (go/tests/bench/bench_test.go).
BENCH_DIR := $(CURDIR)/build/bench
BENCH_FLAGS ?= -v
# Built with compiled-wasm: the bench's rows of compiled WASM modules
# (nri-bench-core's lent layout needs no feature).
bench: NRI_FEATURES := compiled-wasm
bench:
	$(RELEASE_LIB)
	$(CARGO) build --release -p nri-test-tools --bin nri-bench-core
	$(BENCH_PLUGIN)
	$(MAKE) --no-print-directory pkgconfig bench-run NRI_LIB_DIR=$(TARGET_DIR)/release

# The benchmark program links the release staticlib (NRI_LIB_DIR, set by bench).
bench-run:
	cd go/tests && CGO_ENABLED=0 $(GO) build -o $(BENCH_DIR)/goplugin ./bench/goplugin
	cd go/tests && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(BENCH_DIR)/plugin.wasm ./wasm/plugin
	@# cgo does not track libnri.a: remove the program so it is linked afresh.
	rm -f $(BENCH_DIR)/nri-bench
	cd go/tests && $(GO) build -o $(BENCH_DIR)/nri-bench ./bench
	$(BENCH_DIR)/nri-bench -bin $(TARGET_DIR)/release -rustplugin $(BENCH_RUST_PLUGIN) -goplugin $(BENCH_DIR)/goplugin -wasmplugin $(BENCH_DIR)/plugin.wasm \
	  -out docs/performance.json -doc docs/PERFORMANCE.md -png docs/performance.png $(BENCH_FLAGS)

## soak: 100,000 pod and container lifecycles with churn (plugin restarts,
## a plugin joining and leaving, adaptation restarts, unsolicited updates)
## through nri-rs and upstream's adaptation at the same time, one bench
## process each, so that both meet the same load; the results are merged into
## docs/soak.json, docs/soak.png and the soak section of docs/RELIABILITY.md.
## Fails if nri-rs's run does. Takes about 35 minutes; SOAK_FLAGS
## adds flags (e.g. SOAK_FLAGS="-soak-lifecycles 20000").
## `make test` runs a short version (go/tests/bench/soak_test.go).
SOAK_FLAGS ?= -v
soak:
	$(RELEASE_LIB)
	$(BENCH_PLUGIN)
	$(MAKE) --no-print-directory pkgconfig soak-run NRI_LIB_DIR=$(TARGET_DIR)/release

soak-run:
	cd go/tests && CGO_ENABLED=0 $(GO) build -o $(BENCH_DIR)/goplugin ./bench/goplugin
	rm -f $(BENCH_DIR)/nri-bench
	cd go/tests && $(GO) build -o $(BENCH_DIR)/nri-bench ./bench
	@# Each process exits non-zero only for a failed nri-rs run; upstream's
	@# problems are reported in the results.
	$(BENCH_DIR)/nri-bench -soak full -soak-impls upstream -bin $(TARGET_DIR)/release -rustplugin $(BENCH_RUST_PLUGIN) -goplugin $(BENCH_DIR)/goplugin \
	  -soak-out $(BENCH_DIR)/soak-upstream.json $(SOAK_FLAGS) & up=$$!; \
	$(BENCH_DIR)/nri-bench -soak full -soak-impls nri-rs -bin $(TARGET_DIR)/release -rustplugin $(BENCH_RUST_PLUGIN) -goplugin $(BENCH_DIR)/goplugin \
	  -soak-out $(BENCH_DIR)/soak-nri-rs.json $(SOAK_FLAGS); rc=$$?; wait $$up; \
	$(BENCH_DIR)/nri-bench -soak-merge $(BENCH_DIR)/soak-nri-rs.json,$(BENCH_DIR)/soak-upstream.json \
	  -soak-out docs/soak.json -soak-doc docs/RELIABILITY.md -soak-png docs/soak.png && exit $$rc

## header: regenerate crates/nri-capi/include/nri.h with the pinned cbindgen
CAPI_DIR := $(CURDIR)/crates/nri-capi
header: $(CBINDGEN)
	cd $(CAPI_DIR) && $(CBINDGEN) --quiet --config cbindgen.toml --crate nri-capi --output include/nri.h

## check-header: fail when the committed header is stale
check-header: $(CBINDGEN)
	@mkdir -p build
	cd $(CAPI_DIR) && $(CBINDGEN) --quiet --config cbindgen.toml --crate nri-capi --output $(CURDIR)/build/nri.h.check
	@diff -u $(NRI_INCLUDE_DIR)/nri.h build/nri.h.check || \
	  { echo "crates/nri-capi/include/nri.h is stale: run 'make header' and commit it" >&2; exit 1; }

$(CBINDGEN):
	$(CARGO) install --locked --root $(TOOLS) cbindgen --version $(CBINDGEN_VERSION)

fmt:
	$(CARGO) fmt --all
	cd go && gofmt -w .

clean:
	$(CARGO) clean
	rm -rf build
