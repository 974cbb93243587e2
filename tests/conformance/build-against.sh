#!/usr/bin/env bash
# Builds go/adaptation, as a runtime would get it with `go build -overlay`,
# in a scratch module that requires upstream NRI at the given version (CRI-O
# pins v0.12.0, containerd v0.12.2), so the package keeps compiling against
# both. Needs pkg-config to find nri.pc, as the Go tests do.
set -euo pipefail
version=${1:?usage: build-against.sh NRI_VERSION}
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

mkdir -p "$scratch/adaptation"
for f in "$root"/go/adaptation/*.go "$root"/go/adaptation/*.c "$root"/go/adaptation/*.h; do
    case "$f" in *_test.go) continue ;; esac
    # Types new in v0.12.2 (see the file's comment).
    case "$version:$(basename "$f")" in v0.12.[01]:api_v0_12_2.go) continue ;; esac
    cp "$f" "$scratch/adaptation/"
done
cd "$scratch"
cat > go.mod <<MOD
module nri-rs-build-check

go 1.24.0

require github.com/containerd/nri $version
MOD
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod tidy
GOFLAGS=-mod=mod go build ./adaptation
GOFLAGS=-mod=mod go vet ./adaptation
echo "go/adaptation builds against github.com/containerd/nri $version"
