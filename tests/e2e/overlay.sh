#!/usr/bin/env bash
# Writes the `go build -overlay` JSON that swaps nri-rs's Go drop-in
# (go/adaptation) in for upstream's github.com/containerd/nri/pkg/adaptation
# in a runtime's build. No file of the runtime changes:
#   - every file of go/adaptation (not its tests) is mapped into the package
#     directory, shims.c and shims.h included;
#   - every upstream file of that package that go/adaptation does not have
#     is mapped to "" (deleted for the build);
#   - api_v0_12_2.go is left out when the runtime pins NRI < v0.12.2 (it
#     only aliases pkg/api.Image, which older pkg/api lacks), and
#     api_v0_12_4.go when it pins NRI < v0.12.4 (pkg/api.FailurePolicy).
# Subpackages (pkg/adaptation/builtin) stay upstream's.
#
# usage: overlay.sh PKG_DIR NRI_VERSION OUT.json
#   PKG_DIR      absolute path of the runtime's copy of pkg/adaptation,
#                e.g. $SRC/vendor/github.com/containerd/nri/pkg/adaptation
#   NRI_VERSION  the NRI version the runtime pins (vendor/modules.txt)
set -euo pipefail

pkgdir=${1:?usage: overlay.sh PKG_DIR NRI_VERSION OUT.json}
version=${2:?usage: overlay.sh PKG_DIR NRI_VERSION OUT.json}
out=${3:?usage: overlay.sh PKG_DIR NRI_VERSION OUT.json}
ours=$(cd "$(dirname "$0")/../../go/adaptation" && pwd)

case "$pkgdir" in /*) ;; *) echo "overlay.sh: PKG_DIR must be absolute (go reads overlay paths as given)" >&2; exit 1 ;; esac
[ -f "$pkgdir/adaptation.go" ] || { echo "overlay.sh: $pkgdir is not upstream's pkg/adaptation" >&2; exit 1; }

# v0.12.0 and v0.12.1 predate pkg/api.Image; anything older is not supported.
case "$version" in
    v0.12.0 | v0.12.0-* | v0.12.1 | v0.12.1-*) skip_v0122=1 skip_v0124=1 ;;
    v0.12.2 | v0.12.2-* | v0.12.3 | v0.12.3-*) skip_v0122=0 skip_v0124=1 ;;
    v0.12.*) skip_v0122=0 skip_v0124=0 ;;
    *) echo "overlay.sh: go/adaptation targets NRI v0.12.x, the runtime pins $version" >&2; exit 1 ;;
esac

json_str() { # paths are used verbatim: refuse what would need escaping
    case "$1" in *[\"\\]* | *[[:cntrl:]]*) echo "overlay.sh: unsupported character in path $1" >&2; exit 1 ;; esac
    printf '"%s"' "$1"
}

entries=()
declare -A mine=()
for f in "$ours"/*.go "$ours"/*.c "$ours"/*.h; do
    name=$(basename "$f")
    case "$name" in *_test.go) continue ;; esac
    [ "$name" = api_v0_12_2.go ] && [ "$skip_v0122" = 1 ] && continue
    [ "$name" = api_v0_12_4.go ] && [ "$skip_v0124" = 1 ] && continue
    mine[$name]=1
    entries+=("$(json_str "$pkgdir/$name"): $(json_str "$f")")
done
for f in "$pkgdir"/*; do
    [ -f "$f" ] || continue
    name=$(basename "$f")
    [ -n "${mine[$name]:-}" ] && continue
    entries+=("$(json_str "$f"): \"\"")
done

{
    printf '{"Replace": {\n'
    n=${#entries[@]}
    for i in "${!entries[@]}"; do
        sep=,
        [ "$i" -eq $((n - 1)) ] && sep=
        printf '  %s%s\n' "${entries[$i]}" "$sep"
    done
    printf '}}\n'
} >"$out"
