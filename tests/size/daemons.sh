#!/usr/bin/env bash
# What nri-rs adds to the real daemons: containerd (static, as the e2e
# builds it by default) and CRI-O, each built stock and with nri-rs by the
# e2e scripts themselves (E2E_BUILD_ONLY=1: the documented build command,
# the overlay, the link check; cached in build/e2e/bin), then measured
# stripped (tests/size/report.py --daemon). Writes the figures into
# docs/size.json ("daemons") and INTEGRATION.md's size table.
#
#   tests/size/daemons.sh [JSON [DOC]]    (defaults: docs/size.json, docs/INTEGRATION.md)
#
# Needs Go, gcc, the network (module proxy) the first time, and the
# release libnri.a (`make size-daemons` builds it). Takes minutes.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
json=${1:-$root/docs/size.json}
doc=${2:-$root/docs/INTEGRATION.md}
args=()
for rt in containerd crio; do
    paths=()
    for stock in 1 0; do
        # "VERSION PATH" of the unstripped daemon.
        out=$(E2E_BUILD_ONLY=1 E2E_CRITEST=0 E2E_STOCK=$stock "$root/tests/e2e/$rt.sh")
        read -r version path <<<"$out"
        if [ -z "$version" ] || [ ! -f "$path" ]; then
            echo "size: tests/e2e/$rt.sh printed no daemon: '$out'" >&2
            exit 1
        fi
        paths+=("$path")
    done
    args+=(--daemon "$rt" "$version" "${paths[@]}")
done
"$root/tests/size/report.py" --json "$json" --doc "$doc" "${args[@]}"
