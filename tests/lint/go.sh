#!/usr/bin/env bash
# gofmt and go vet over every Go module of the repository (each go.mod
# git tracks). go vet type-checks cgo code, so CGO_CFLAGS must find nri.h:
# the Makefile exports it. go vet skips go/adaptation/_before_v*/, which
# builds only against older NRI releases: build-against.sh vets it there.
set -euo pipefail

cd "$(dirname "$0")/../.."
status=0
while IFS= read -r mod; do
    dir=$(dirname "$mod")
    unformatted=$(cd "$dir" && gofmt -l .)
    if [ -n "$unformatted" ]; then
        echo "lint-go: not gofmt-formatted (run 'make fmt'):" >&2
        while IFS= read -r f; do echo "  $dir/$f" >&2; done <<<"$unformatted"
        status=1
    fi
    echo "lint-go: go vet in $dir"
    (cd "$dir" && go vet ./...) || status=1
done < <(git ls-files -- 'go.mod' '*/go.mod')
exit "$status"
