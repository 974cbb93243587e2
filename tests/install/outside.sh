#!/usr/bin/env bash
# nri-rs as a user outside this repository gets it: `make release`, then
# `make install` into a temporary prefix, the Go module copied elsewhere,
# and a consumer module of its own (a `replace` directive to the copy) that
# builds go/example's program with nothing but PKG_CONFIG_PATH pointing at
# the prefix. The program then runs a pod and a container through a real
# plugin, linked dynamically and, as containerd's STATIC=1 release builds
# are, statically. Then the installed overlay writer (nri-rs-overlay) swaps
# nri-rs in for upstream's pkg/adaptation, from the Go module cache, in a
# program that imports upstream's; and `make uninstall` removes it all.
#
# Usage: outside.sh PLUGIN   (PLUGIN: a plugin binary, e.g. nri-logger)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
plugin=$(realpath "${1:?usage: outside.sh PLUGIN}")
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

say() { echo "outside: $*"; }

# install: copies only, into PREFIX, what release built.
install_into() {
    make -C "$root" --no-print-directory install PREFIX="$1" >"$work/install.log" 2>&1 ||
        { cat "$work/install.log" >&2; exit 1; }
}
say "make release; make install PREFIX=$work/prefix"
make -C "$root" --no-print-directory release >"$work/release.log" 2>&1 ||
    { cat "$work/release.log" >&2; exit 1; }
install_into "$work/prefix"
for f in lib/libnri.a include/nri.h lib/pkgconfig/nri.pc share/nri-rs/nri.proto bin/nri-rs-overlay \
    share/nri-rs/go/adaptation-files.sh share/nri-rs/go/adaptation/adaptation.go share/nri-rs/go/adaptation/shims.c; do
    [ -f "$work/prefix/$f" ] || { echo "outside: make install did not install $f" >&2; exit 1; }
done
# nri-wasm-compile comes with the library's compiled-wasm feature, which
# the default build leaves out (nri-wasm's tests/compile.rs tests the tool).
[ ! -e "$work/prefix/bin/nri-wasm-compile" ] ||
    { echo "outside: make install without compiled-wasm installed nri-wasm-compile" >&2; exit 1; }

# The library's Go module as `go get` would bring it: go/ without go/tests
# (nor the vendor/ of a tarball of `make dist`, nor Go's build output).
mkdir -p "$work/nri-rs-go" "$work/consumer"
tar -C "$root/go" --exclude=./tests --exclude=./vendor --exclude=./bin -cf - . | tar -C "$work/nri-rs-go" -xf -
cp "$root/go/example/main.go" "$work/consumer/main.go"
cat >"$work/consumer/go.mod" <<MOD
module example.com/nri-consumer

go 1.24.0

require github.com/nri-rs/nri-rs/go v0.0.0

replace github.com/nri-rs/nri-rs/go => ../nri-rs-go
MOD

# Only what a user sets: the prefix's pkg-config directory. No CGO_CFLAGS or
# CGO_LDFLAGS from the Makefile, no path into this repository.
# A build cache of its own too: Go's cache does not see pkg-config's
# answer, so a package built earlier against the repository's library
# could otherwise be linked instead of the installed one.
consumer_env=(env -u CGO_CFLAGS -u CGO_LDFLAGS -u CGO_CPPFLAGS
    PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" GOFLAGS=-mod=mod GOCACHE="$work/gocache")
cd "$work/consumer"
"${consumer_env[@]}" go mod tidy >/dev/null 2>&1 ||
    { "${consumer_env[@]}" go mod tidy; exit 1; }

run() {
    local bin=$1 out
    out=$("$bin" -plugin "$plugin" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
    for want in "started with plugin" "adjustment for ctr-1:" "pod and container lifecycle done"; do
        grep -q "$want" <<<"$out" || { printf '%s\n' "$out" >&2; echo "outside: $bin: no '$want'" >&2; return 1; }
    done
}

say "go build (dynamic) with only PKG_CONFIG_PATH"
"${consumer_env[@]}" go build -o "$work/consumer-dynamic" .
run "$work/consumer-dynamic"

say "go build (static, -extldflags -static)"
"${consumer_env[@]}" go build -tags netgo,osusergo \
    -ldflags '-linkmode external -extldflags "-static"' -o "$work/consumer-static" . 2>"$work/static.log" ||
    { cat "$work/static.log" >&2; exit 1; }
if ldd "$work/consumer-static" >/dev/null 2>&1; then
    echo "outside: the static build is dynamically linked:" >&2
    ldd "$work/consumer-static" >&2
    exit 1
fi
run "$work/consumer-static"

# Another prefix, the first one gone, the same build cache: what the e2e
# scripts meet when clones share a cache. With -trimpath nothing in Go's
# cache key tells the two installs apart but the fingerprint that
# docs/INTEGRATION.md (step 3) puts into CGO_CFLAGS.
fingerprint() { cat "$1/lib/pkgconfig/nri.pc" "$1/include/nri.h" "$1/lib/libnri.a" | sha256sum | cut -c1-16; }
trimmed_build() { # PREFIX OUT [CGO_CFLAGS]
    env -u CGO_LDFLAGS -u CGO_CPPFLAGS CGO_CFLAGS="${3:--O2 -g}" PKG_CONFIG_PATH="$1/lib/pkgconfig" \
        GOFLAGS=-mod=mod GOCACHE="$work/gocache" go build -trimpath -o "$2" . 2>"$work/trimmed.log"
}
say "a second prefix after the first is gone, -trimpath, CGO_CFLAGS with the install's fingerprint"
trimmed_build "$work/prefix" "$work/consumer-trimmed" ||
    { cat "$work/trimmed.log" >&2; exit 1; }
install_into "$work/prefix2"
rm -rf "$work/prefix"
if ! trimmed_build "$work/prefix2" "$work/consumer-trimmed2"; then
    say "(as documented: without the fingerprint, Go reuses the package built against the removed prefix)"
fi
trimmed_build "$work/prefix2" "$work/consumer-trimmed3" "-O2 -g -DNRI_RS_INSTALL_ID=$(fingerprint "$work/prefix2")" ||
    { cat "$work/trimmed.log" >&2; echo "outside: the fingerprinted build still used the removed prefix" >&2; exit 1; }
run "$work/consumer-trimmed3"

# The overlay writer as a runtime's build uses it: upstream's
# pkg/adaptation, vendored from the module cache (go refuses to overlay
# files of the cache itself), replaced for the build of a program that
# imports it (go/example's, with upstream's import path).
nri_version=$(awk '$1 == "github.com/containerd/nri" { print $2 }' "$root/go/go.mod")
say "nri-rs-overlay over upstream's pkg/adaptation $nri_version (vendored), go build -overlay"
mkdir "$work/runtime"
sed 's|nri "github.com/nri-rs/nri-rs/go/adaptation"|nri "github.com/containerd/nri/pkg/adaptation"|' \
    "$root/go/example/main.go" >"$work/runtime/main.go"
grep -q '"github.com/containerd/nri/pkg/adaptation"' "$work/runtime/main.go" ||
    { echo "outside: go/example/main.go no longer imports go/adaptation as expected" >&2; exit 1; }
cat >"$work/runtime/go.mod" <<MOD
module example.com/nri-runtime

go 1.24.0

require github.com/containerd/nri $nri_version
MOD
runtime_env=(env -u CGO_LDFLAGS -u CGO_CPPFLAGS PKG_CONFIG_PATH="$work/prefix2/lib/pkgconfig"
    CGO_CFLAGS="-O2 -g -DNRI_RS_INSTALL_ID=$(fingerprint "$work/prefix2")" GOFLAGS=-mod=mod GOCACHE="$work/gocache")
cd "$work/runtime"
{ "${runtime_env[@]}" go mod tidy && "${runtime_env[@]}" go mod vendor; } >"$work/tidy.log" 2>&1 ||
    { cat "$work/tidy.log" >&2; exit 1; }
pkgdir=$work/runtime/vendor/github.com/containerd/nri/pkg/adaptation
"$work/prefix2/bin/nri-rs-overlay" "$pkgdir" "$nri_version" "$work/overlay.json"
grep -q "\"$work/prefix2/share/nri-rs/go/adaptation/shims.c\"" "$work/overlay.json" ||
    { cat "$work/overlay.json" >&2; echo "outside: the overlay does not map the installed go/adaptation" >&2; exit 1; }
"${runtime_env[@]}" GOFLAGS=-mod=vendor go build -overlay "$work/overlay.json" -o "$work/runtime-overlay" . 2>"$work/overlay.log" ||
    { cat "$work/overlay.log" >&2; exit 1; }
# nri-rs's core is in it (nri.h's functions), upstream's Go runtime is not.
go tool nm "$work/runtime-overlay" >"$work/nm.txt"
grep -q ' nri_adaptation_' "$work/nm.txt" ||
    { echo "outside: the overlay build did not link libnri.a" >&2; exit 1; }
run "$work/runtime-overlay"

say "make uninstall PREFIX=$work/prefix2"
make -C "$root" --no-print-directory uninstall PREFIX="$work/prefix2" >"$work/uninstall.log" 2>&1 ||
    { cat "$work/uninstall.log" >&2; exit 1; }
left=$(find "$work/prefix2" -type f)
[ -z "$left" ] || { echo "outside: make uninstall left files behind:" >&2; echo "$left" >&2; exit 1; }

say "ok: installed nri-rs builds and runs outside the repository, dynamic and static, and through the overlay"
