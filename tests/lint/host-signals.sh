#!/usr/bin/env bash
# The library a runtime links (nri-capi: libnri.a) must never install a
# signal handler in the program hosting it. A Go daemon (containerd, CRI-O)
# aborts at the next signal whose handler was installed behind the Go
# runtime's back without SA_ONSTACK; tokio's process support does exactly
# that for SIGCHLD where pidfd_open is unavailable. So this refuses, in
# nri-capi's dependency graph as resolved for nri-capi alone, with its
# compiled-wasm feature, a superset of the default build's (what `make
# install` builds, with or without NRI_FEATURES; the tests and plugins may
# use more):
#   - tokio's "process" or "signal" feature, and signal-hook-registry;
#   - in the sources of the nri-rs crates in it: tokio::process,
#     tokio::signal, signal_hook, or a call to sigaction or signal.
# crates/nri-runtime/src/child.rs reaps plugins without a handler.
set -euo pipefail

cd "$(dirname "$0")/../.."

graph=$(cargo tree --locked -p nri-capi --features compiled-wasm -e normal,build -f '{p} {f}' --prefix none | sort -u)
status=0

tokio_features=$(awk '$1 == "tokio" { print $3 }' <<<"$graph" | tr ',' '\n' | sort -u)
for feature in process signal; do
    if grep -qx "$feature" <<<"$tokio_features"; then
        echo "host-signals: tokio's \"$feature\" feature is enabled in nri-capi's graph:" >&2
        cargo tree --locked -p nri-capi --features compiled-wasm -e features -i tokio >&2 || true
        status=1
    fi
done
if grep -q '^signal-hook' <<<"$graph"; then
    echo "host-signals: signal-hook is in nri-capi's graph:" >&2
    cargo tree --locked -p nri-capi --features compiled-wasm -e normal,build -i signal-hook-registry >&2 || true
    status=1
fi

# Our crates in the graph: the ones with a path, "name vX (/path)".
dirs=$(sed -n 's/^[^ ]* v[^ ]* (\(\/[^)]*\)).*/\1/p' <<<"$graph" | sort -u)
[ -n "$dirs" ] || { echo "host-signals: found none of our crates in nri-capi's graph" >&2; exit 1; }
# A call, not a method such as ExitStatus's .signal().
pattern='tokio::(process|signal)|signal_hook|(^|[^.[:alnum:]_])(sigaction|signal)\('
for dir in $dirs; do
    if hits=$(grep -rnE "$pattern" --include='*.rs' "$dir/src"); then
        echo "host-signals: signal handling in the code libnri.a links:" >&2
        echo "$hits" >&2
        status=1
    fi
done

[ "$status" = 0 ] && echo "host-signals: nri-capi's graph ($(wc -w <<<"$dirs") crates of ours) installs no signal handler"
exit "$status"
