# shellcheck shell=bash
# Shared by the scripts in tests/conformance (sourced, not run). They all
# build go/adaptation outside the repository, in a scratch module that
# requires one release of upstream NRI, so that the package is compiled
# against that release's pkg/api and nothing else.

# The releases whose pkg/adaptation suite `make conformance` runs, oldest
# first. upstream-check.sh treats anything newer than the last one as new.
# shellcheck disable=SC2034 # used by the scripts that source this file
conformance_versions="v0.10.0 v0.11.0 v0.12.0 v0.12.1 v0.12.2 v0.12.3 v0.12.4 v0.12.5"

nri_module=github.com/containerd/nri
conformance_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$conformance_dir/../.." && pwd)

# upstream_dir VERSION: where the module cache holds that release
# (downloaded through the module proxy when it is not there yet).
upstream_dir() {
    local dir
    dir=$(cd "$repo_root/go" && GOWORK=off go mod download -json "$nri_module@$1" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] && [ -d "$dir" ] && { echo "$dir"; return 0; }
    { echo "$nri_module@$1 is not in the module cache and cannot be downloaded" >&2; return 1; }
}

# copy_adaptation VERSION DEST: go/adaptation's sources for a runtime on
# VERSION (no tests; go/adaptation-files.sh says which) into DEST.
copy_adaptation() {
    local version=$1 dest=$2 files f
    files=$("$repo_root/go/adaptation-files.sh" "$version") || return 1
    mkdir -p "$dest"
    while IFS= read -r f; do
        cp "$f" "$dest/"
    done <<<"$files"
}

# released_after VERSION: the releases of upstream NRI on the module proxy
# newer than VERSION, oldest first, one a line. Asked from a directory of
# its own: inside a module, `go list -m -versions` leaves out what that
# go.mod excludes.
released_after() {
    local tmp list
    tmp=$(mktemp -d)
    list=$(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod go list -m -versions "$nri_module") || { rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
    echo "$list" | tr ' ' '\n' | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' |
        { cat; echo "$1"; } | sort -uV | awk -v v="$1" 'seen { print } $0 == v { seen = 1 }'
}

# pinned_version: the version of upstream NRI the module in the current
# directory builds with (after `go mod tidy`).
pinned_version() {
    GOWORK=off go list -m -f '{{.Version}}' "$nri_module"
}
