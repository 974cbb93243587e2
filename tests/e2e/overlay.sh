#!/usr/bin/env bash
# Writes the `go build -overlay` JSON that swaps nri-rs's Go drop-in
# (go/adaptation) in for upstream's github.com/containerd/nri/pkg/adaptation
# in a runtime's build. No file of the runtime changes:
#   - every file go/adaptation-files.sh lists for the NRI release the
#     runtime pins (go/adaptation's sources, shims.c and shims.h included,
#     less what names newer releases, plus what stands in for it on older
#     ones) is mapped into the package directory;
#   - every upstream file of that package that is not among them is mapped
#     to "" (deleted for the build).
# Subpackages (pkg/adaptation/builtin) stay upstream's.
#
# usage: overlay.sh PKG_DIR NRI_VERSION OUT.json
#   (installed by `make install` as nri-rs-overlay; docs/PACKAGING.md)
#   PKG_DIR      absolute path of the runtime's copy of pkg/adaptation,
#                e.g. $SRC/vendor/github.com/containerd/nri/pkg/adaptation
#   NRI_VERSION  the NRI version the runtime pins (vendor/modules.txt)
set -euo pipefail

pkgdir=${1:?usage: overlay.sh PKG_DIR NRI_VERSION OUT.json}
version=${2:?usage: overlay.sh PKG_DIR NRI_VERSION OUT.json}
out=${3:?usage: overlay.sh PKG_DIR NRI_VERSION OUT.json}
# nri-rs's go/ (adaptation-files.sh, adaptation/): this repository's, or
# where `make install` put it (it rewrites this line).
go_dir=$(cd "$(dirname "$0")/../../go" && pwd)
ours=$go_dir/adaptation

case "$pkgdir" in /*) ;; *) echo "overlay.sh: PKG_DIR must be absolute (go reads overlay paths as given)" >&2; exit 1 ;; esac
[ -f "$pkgdir/adaptation.go" ] || { echo "overlay.sh: $pkgdir is not upstream's pkg/adaptation" >&2; exit 1; }

files=$("$ours/../adaptation-files.sh" "$version")

json_str() { # paths are used verbatim: refuse what would need escaping
    case "$1" in *[\"\\]* | *[[:cntrl:]]*) echo "overlay.sh: unsupported character in path $1" >&2; exit 1 ;; esac
    printf '"%s"' "$1"
}

entries=()
declare -A mine=()
while IFS= read -r f; do
    name=$(basename "$f")
    mine[$name]=1
    entries+=("$(json_str "$pkgdir/$name"): $(json_str "$f")")
done <<<"$files"
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
