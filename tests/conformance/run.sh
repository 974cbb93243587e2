#!/usr/bin/env bash
# Runs upstream NRI's own pkg/adaptation test suite against nri-rs's Go
# drop-in (go/adaptation, backed by the Rust core), unmodified apart from
# the import path of pkg/adaptation.
#
# The test files come from the Go module cache at the pinned version and
# are removed afterwards; nothing from upstream is committed. Specs that
# cannot pass because upstream's behaviour is a bug we fixed are listed in
# known-differences.txt (one ginkgo regexp per line, each explained in
# docs/COMPATIBILITY.md) and skipped; their count is printed.
#
# Needs pkg-config to find nri.pc (the Makefile points PKG_CONFIG_PATH at
# the one `make build` writes). Prints "N passed, N failed, N skipped (known
# differences)" and fails unless every spec that ran passed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${NRI_UPSTREAM_VERSION:-v0.12.2}
pkg="$root/go/adaptation"

upstream=$(cd "$root/go" && go mod download -json "github.com/containerd/nri@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$upstream/pkg/adaptation" ] || { echo "upstream NRI $version not in the module cache" >&2; exit 1; }

# The suite needs modules the library does not (ginkgo, gomega, go-cmp).
# go/tests pins them (go/tests/conformance/deps_test.go); a temporary copy
# of go/go.mod (-modfile) requires them at those versions for this run, so
# the library's own go.mod and go.sum stay as they are.
scratch=$(mktemp -d)
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() { rm -f "$pkg"/zz_upstream_*_test.go; rm -rf "$scratch"; }
trap cleanup EXIT
modfile="$scratch/go.mod"
cp "$root/go/go.mod" "$modfile"
cat "$root/go/go.sum" "$root/go/tests/go.sum" | sort -u >"$scratch/go.sum"
for m in $(cd "$root/go/tests" && go list -m -f '{{.Path}}@{{.Version}}' \
    github.com/onsi/ginkgo/v2 github.com/onsi/gomega github.com/google/go-cmp); do
    go mod edit -require="$m" "$modfile"
done
for f in adaptation_suite_test.go suite_test.go; do
    sed 's#"github.com/containerd/nri/pkg/adaptation"#"github.com/nri-rs/nri-rs/go/adaptation"#' \
        "$upstream/pkg/adaptation/$f" > "$pkg/zz_upstream_$f"
    grep -q '"github.com/nri-rs/nri-rs/go/adaptation"' "$pkg/zz_upstream_$f" ||
        { echo "import of pkg/adaptation not found in upstream $f" >&2; exit 1; }
done

skip=$(grep -v '^\s*\(#\|$\)' "$here/known-differences.txt" | paste -sd'|' || true)
args=(-modfile="$modfile" -mod=mod -v -count=1 -race -run '^TestRuntime$' ./adaptation -args -ginkgo.no-color)
[ -n "$skip" ] && args+=("-ginkgo.skip=$skip")

log=$(mktemp)
set +e
(cd "$root/go" && GOEXPERIMENT=cgocheck2 go test "${args[@]}") >"$log" 2>&1
rc=$?
set -e

summary=$(grep -E '^(SUCCESS|FAIL)! -- ' "$log" | tail -1 || true)
if [ -z "$summary" ]; then
    cat "$log"
    echo "conformance: the upstream suite did not run" >&2
    exit 1
fi
num() { echo "$summary" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
passed=$(num Passed); failed=$(num Failed); skipped=$(num Skipped)
if [ "$rc" -ne 0 ]; then
    grep -E '^\s*\[FAIL\]|DATA RACE|race detected' "$log" | sort -u || true
fi
echo "upstream NRI $version pkg/adaptation suite on nri-rs: $passed passed, $failed failed, $skipped skipped (known differences)"
rm -f "$log"
exit "$rc"
