#!/usr/bin/env bash
# Looks for releases of upstream NRI newer than the newest one `make
# conformance` covers (lib.sh's conformance_versions) and, for each, runs
# its pkg/adaptation suite against go/adaptation (run.sh, judged by
# known-differences.txt, whose `vX+` entries reach new releases too) and
# builds go/adaptation against it (build-against.sh). Prints a summary;
# exits 0 when there is nothing new or every new release passes both.
# Needs the module proxy, and what `make build` leaves for run.sh.
# NRI_CONFORMANCE_COVERED=vX pretends the coverage ends at vX (to try this
# script out while no newer release exists).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
covered=${NRI_CONFORMANCE_COVERED:-${conformance_versions##* }}

newer=$(released_after "$covered") ||
    { echo "upstream-check: cannot list the releases of $nri_module (is the module proxy reachable?)" >&2; exit 1; }
if [ -z "$newer" ]; then
    echo "upstream-check: no release of $nri_module newer than $covered, the newest our conformance covers; nothing to check"
    exit 0
fi
echo "upstream-check: releases newer than $covered: $(echo "$newer" | paste -sd' ')"

summary=() bad=0
for v in $newer; do
    suite=ok build=ok
    "$here/run.sh" "$v" || { suite=FAILED; bad=1; }
    "$here/build-against.sh" "$v" || { build=FAILED; bad=1; }
    summary+=("$v: pkg/adaptation suite $suite, build-against $build")
done
echo "upstream-check summary (covered up to $covered):"
printf '  %s\n' "${summary[@]}"
if [ "$bad" = 1 ]; then
    echo "upstream-check: a new release needs work: add it to conformance_versions in tests/conformance/lib.sh once its differences are listed" >&2
    exit 1
fi
echo "upstream-check: every new release passes; add them to conformance_versions in tests/conformance/lib.sh"
