#!/usr/bin/env bash
# The Rust stub (crates/nri-stub) against upstream's Go runtimes: for each
# release of github.com/containerd/nri from v0.10.0 on (lib.sh's list, or
# the versions given), go/tests/cmd/stub-against is built in a scratch
# module that requires exactly that release, and hosts two Rust plugins in
# that release's pkg/adaptation: the logger, launched from the plugin
# directory, and the template, dialing the socket. It drives a pod and a
# container through every event and checks that both plugins were
# synchronized, got their events and that the logger's adjustment came
# back (the program's comment says how).
#
#   stub-against.sh [BIN_DIR [VERSION...]]
#
# BIN_DIR holds nri-logger and nri-template (default target/debug of the
# repository, or $CARGO_TARGET_DIR/debug). The modules come from the
# module cache, through the Go module proxy when missing; nothing of
# upstream's is kept in the repository. One `go build` per release,
# cached by Go after the first run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
bin_dir=${1:-${CARGO_TARGET_DIR:-$repo_root/target}/debug}
shift || true
versions=${*:-$conformance_versions}
for b in nri-logger nri-template; do
    [ -x "$bin_dir/$b" ] || { echo "stub-against: no $bin_dir/$b (cargo build -p ${b#nri-} first)" >&2; exit 1; }
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/src"
cp "$repo_root/go/tests/cmd/stub-against/main.go" "$scratch/src/"
cd "$scratch/src"
export GOWORK=off GOFLAGS=-mod=mod
start=$SECONDS
for version in $versions; do
    cat >go.mod <<MOD
module nri-rs-stub-against

go 1.24.0

require $nri_module $version
MOD
    rm -f go.sum
    go mod tidy >"$scratch/tidy.log" 2>&1 || { cat "$scratch/tidy.log" >&2; exit 1; }
    got=$(pinned_version)
    [ "$got" = "$version" ] || { echo "stub-against: asked for $version, go mod tidy chose $got" >&2; exit 1; }
    go build -o "$scratch/stub-against-$version" .
    # The runtime's own log is shown only when the check fails.
    "$scratch/stub-against-$version" -logger "$bin_dir/nri-logger" -template "$bin_dir/nri-template" \
        2>"$scratch/runtime.log" || { cat "$scratch/runtime.log" >&2; exit 1; }
done
echo "stub-against: $(wc -w <<<"$versions") upstream runtimes in $((SECONDS - start))s"
