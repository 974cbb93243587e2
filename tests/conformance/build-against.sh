#!/usr/bin/env bash
# Builds go/adaptation, as a runtime would get it with `go build -overlay`,
# in a scratch module that requires upstream NRI at the given version (CRI-O
# v1.36 pins v0.11.0, containerd v0.12.3), so the package keeps compiling
# against each; the files are those go/adaptation-files.sh lists for it.
# Then runs the package's tests that can run against any release (those
# whose file says so at its top). Needs pkg-config to find nri.pc and
# libnri.a, as the Go tests do.
#
#   build-against.sh VERSION
#
# Fails unless the package builds, vets and passes those tests against
# exactly VERSION: when go/adaptation imports a package VERSION lacks, `go mod tidy` would raise
# the requirement to the newest release that has it and the build would
# test that one instead. Then the script says so and shows what the build
# at VERSION itself reports (newer releases excluded, so that tidy cannot
# move).
set -euo pipefail
version=${1:?usage: build-against.sh NRI_VERSION}
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

copy_adaptation "$version" "$scratch/adaptation"
cd "$scratch"
scratch_mod() {
    cat >go.mod <<MOD
module nri-rs-build-check

go 1.24.0

require $nri_module $version
MOD
}
scratch_mod
export GOWORK=off GOFLAGS=-mod=mod
go mod tidy >tidy.log 2>&1 || { cat tidy.log >&2; exit 1; }
got=$(pinned_version)
if [ "$got" != "$version" ]; then
    echo "build-against: asked for $nri_module $version, but go mod tidy raised it to $got" >&2
    echo "build-against: go/adaptation needs what $version does not have; at $version itself:" >&2
    scratch_mod
    newer=$(released_after "$version") || newer=
    for v in $newer; do go mod edit -exclude="$nri_module@$v"; done
    { go mod tidy -e 2>&1 | grep -v '^go: \(downloading\|finding\|found\) '; } >&2 || true
    go build -gcflags=-e ./adaptation 2>&1 | sed 's/^/    /' >&2 || true
    echo "build-against: go/adaptation does NOT build against $nri_module $version" >&2
    exit 1
fi
go build ./adaptation
go vet ./adaptation
# The package's own tests that name nothing a release may lack say so at
# their top; they run here, against this release's pkg/api and builtin.
tests=$(grep -l '^// The tests of this file run against every NRI release' "$repo_root"/go/adaptation/*_test.go)
while IFS= read -r f; do cp "$f" adaptation/; done <<<"$tests"
go test -count=1 ./adaptation >test.log 2>&1 || { cat test.log >&2; echo "build-against: go/adaptation's tests fail against $nri_module $version" >&2; exit 1; }
echo "go/adaptation builds against $nri_module $version; its release-neutral tests pass ($(xargs -n1 basename <<<"$tests" | tr '\n' ' ' | sed 's/ $//'))"
