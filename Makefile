# nri-rs build, test and demo entry points. `make demo` and `make test` work
# from a bare clone once the toolchains are installed (.ci/run does that).

CARGO      ?= cargo
GO         ?= go
CBINDGEN_VERSION := 0.29.4
TOOLS      := $(CURDIR)/build/tools
CBINDGEN   := $(TOOLS)/bin/cbindgen
GO_TEST_FLAGS ?= -count=1

.PHONY: all build demo demo-go test test-rust test-go header check-header fmt clean

all: build

## build: the library (rlib + staticlib), the sample plugins and test tools
build:
	$(CARGO) build --workspace

## demo: the Rust adaptation core hosting Rust plugins, driving one pod and container
demo: build
	$(CURDIR)/target/debug/nri-rs-demo $(CURDIR)/target/debug

## demo-go: the same plugins under upstream's Go runtime adaptation
demo-go: build
	cd go && $(GO) run ./cmd/nri-demo -bin $(CURDIR)/target/debug

## test: every test (Rust unit + integration, Go wire and interop, header)
test: check-header test-rust test-go

test-rust:
	$(CARGO) test --workspace

# The Go tests drive the Rust binaries built by `build`.
test-go: build
	cd go && $(GO) vet ./...
	cd go && $(GO) test $(GO_TEST_FLAGS) -race ./...

## header: regenerate include/nri.h with the pinned cbindgen
header: $(CBINDGEN)
	$(CBINDGEN) --config cbindgen.toml --crate nri-rs --output include/nri.h

## check-header: fail when include/nri.h is stale
check-header: $(CBINDGEN)
	$(CBINDGEN) --config cbindgen.toml --crate nri-rs --output build/nri.h.check
	@diff -u include/nri.h build/nri.h.check || \
	  { echo "include/nri.h is stale: run 'make header' and commit it" >&2; exit 1; }

$(CBINDGEN):
	$(CARGO) install --locked --root $(TOOLS) cbindgen --version $(CBINDGEN_VERSION)

fmt:
	$(CARGO) fmt --all
	cd go && gofmt -w .

clean:
	$(CARGO) clean
	rm -rf build
