#!/bin/sh
# Fails unless the native libraries the Makefile links the C tests with
# (its NRI_NATIVE_LIBS, passed as $1) are exactly those rustc names for the
# release staticlib, in the same order (rustls-ffi's tests/static_libs.rs).
# nri.pc takes the list from the Makefile; the Go packages' link lines for
# builds without pkg-config (go/*/link_nopkgconfig.go) repeat it, and are
# checked here too. Both leave out -lgcc_s (see crates/nri-capi/nri.pc.in).
# Cargo replays the note from its cache when the build is fresh, so this
# costs one build of the staticlib the first time only. It is built as the
# Makefile's RELEASE_LIB builds it: a staticlib alone.
set -eu
want=$1
out=$(${CARGO:-cargo} rustc --release -p nri-capi --lib --crate-type staticlib -- \
      --print native-static-libs 2>&1) || { printf '%s\n' "$out" >&2; exit 1; }
got=$(printf '%s\n' "$out" | sed -n 's/.*native-static-libs: //p' | tail -n 1)
if [ -z "$got" ]; then
    printf '%s\n' "$out" >&2
    echo "check-static-libs: rustc printed no native-static-libs" >&2
    exit 1
fi
if [ "$got" != "$want" ]; then
    echo "check-static-libs: the Makefile links libnri.a with" >&2
    echo "    $want" >&2
    echo "but rustc says it needs" >&2
    echo "    $got" >&2
    echo "update NRI_NATIVE_LIBS in the Makefile and go/*/link_nopkgconfig.go" >&2
    exit 1
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
line="// #cgo LDFLAGS: -lnri $(printf '%s\n' "$want" | sed 's/-lgcc_s //')"
for f in "$root"/go/*/link_nopkgconfig.go; do
    grep -qxF "$line" "$f" || {
        echo "check-static-libs: $f lacks the line" >&2
        echo "    $line" >&2
        exit 1
    }
done
echo "check-static-libs: libnri.a needs $got, as the Makefile and the Go link lines say"
