#!/usr/bin/env bash
# Lists the files that make up go/adaptation for a runtime that pins a given
# release of upstream NRI, one absolute path a line. The overlay
# (tests/e2e/overlay.sh) and the build and conformance checks
# (tests/conformance) take the package from here, so the rule lives once:
#
#   - every non-test .go, .c and .h file of go/adaptation, except
#   - a file named *_vX_Y_Z.go, which names what upstream added in vX.Y.Z:
#     listed only for vX.Y.Z and later;
#   - and the files of go/adaptation/_before_vX_Y_Z/, which stand in for
#     what that release added: listed only before vX.Y.Z. (The go command
#     ignores directories starting with "_", so inside this repository,
#     which builds against the newest release, they are never compiled.)
#
# A pre-release or pseudo-version counts as the release it names
# (v0.12.2-rc.1 as v0.12.2). Releases before v0.10.0 and from v0.13.0 on
# are refused.
#
#   adaptation-files.sh NRI_VERSION
set -euo pipefail
version=${1:?usage: adaptation-files.sh NRI_VERSION}
dir=$(cd "$(dirname "$0")/adaptation" && pwd)

release=${version%%[-+]*}
if ! [[ $release =~ ^v0\.1[012]\.[0-9]+$ ]]; then
    echo "adaptation-files.sh: go/adaptation builds against NRI v0.10.0 to v0.12.x, not $version" >&2
    exit 1
fi

# at_least X_Y_Z: whether the release asked for is vX.Y.Z or newer.
at_least() {
    local want=v${1//_/.}
    [ "$(printf '%s\n%s\n' "$want" "$release" | sort -V | head -n1)" = "$want" ]
}

declare -A seen=()
emit() {
    local name=${1##*/}
    if [ -n "${seen[$name]:-}" ]; then
        echo "adaptation-files.sh: $name is both ${seen[$name]} and $1" >&2
        exit 1
    fi
    seen[$name]=$1
    echo "$1"
}

for f in "$dir"/*.go "$dir"/*.c "$dir"/*.h; do
    name=${f##*/}
    case "$name" in *_test.go) continue ;; esac
    if [[ $name =~ _v([0-9]+_[0-9]+_[0-9]+)\.go$ ]] && ! at_least "${BASH_REMATCH[1]}"; then
        continue
    fi
    emit "$f"
done
for d in "$dir"/_before_v*; do
    [ -d "$d" ] || continue
    if ! [[ ${d##*/} =~ ^_before_v([0-9]+_[0-9]+_[0-9]+)$ ]]; then
        echo "adaptation-files.sh: $d: expected _before_vX_Y_Z" >&2
        exit 1
    fi
    at_least "${BASH_REMATCH[1]}" && continue
    for f in "$d"/*.go; do
        case "$f" in *_test.go) continue ;; esac
        emit "$f"
    done
done
