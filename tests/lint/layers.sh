#!/usr/bin/env bash
# The workspace's layering, checked on the dependency graph (normal and
# build dependencies; tests may use more): each crate may use only the
# layers below it, and the sample plugins only the plugin side. Cargo
# already refuses cycles; this refuses the arrows that would be legal for
# Cargo but wrong for nri-rs, e.g. the core depending on the C ABI, or a
# plugin compiling the runtime core.
set -euo pipefail

cd "$(dirname "$0")/../.."

# crate: the nri-rs crates it must never depend on.
forbidden() {
    case "$1" in
        nri-api) echo "nri-yaml nri-stub nri-stub-macros nri-validator nri-spec nri-wasm nri-runtime nri-capi" ;;
        nri-yaml) echo "nri-api nri-stub nri-stub-macros nri-validator nri-spec nri-wasm nri-runtime nri-capi" ;;
        nri-stub-macros) echo "nri-api nri-yaml nri-stub nri-validator nri-spec nri-wasm nri-runtime nri-capi" ;;
        nri-stub) echo "nri-validator nri-spec nri-wasm nri-runtime nri-capi" ;;
        nri-validator) echo "nri-stub nri-stub-macros nri-spec nri-wasm nri-runtime nri-capi" ;;
        nri-spec) echo "nri-stub nri-stub-macros nri-validator nri-wasm nri-runtime nri-capi" ;;
        nri-wasm) echo "nri-stub nri-stub-macros nri-validator nri-spec nri-runtime nri-capi" ;;
        nri-runtime) echo "nri-stub nri-stub-macros nri-spec nri-capi" ;;
        nri-capi) echo "nri-stub nri-stub-macros" ;;
        # The validator run as an external plugin: its whole job is
        # nri_validator::DefaultValidator.
        nri-default-validator) echo "nri-spec nri-wasm nri-runtime nri-capi" ;;
        # Sample plugins: the plugin side only (YAML comes from nri-yaml,
        # through the kit).
        *) echo "nri-validator nri-spec nri-wasm nri-runtime nri-capi" ;;
    esac
}

members=$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json,sys; m=json.load(sys.stdin)
for p in m["packages"]:
    d=p["manifest_path"]
    if "/crates/" in d or "/plugins/" in d: print(p["name"])')

status=0
for crate in $members; do
    deps=$(cargo tree --locked -p "$crate" -e normal,build --prefix none --format '{p}' |
        awk '{print $1}' | sort -u)
    for bad in $(forbidden "$crate"); do
        if grep -qx "$bad" <<<"$deps"; then
            echo "layers: $crate depends on $bad:" >&2
            cargo tree --locked -p "$crate" -e normal,build -i "$bad" >&2 || true
            status=1
        fi
    done
done
[ "$status" = 0 ] && echo "layers: $(wc -w <<<"$members") crates keep to their layers"

# Inside each crate: no two modules, and no two folders, use each other.
python3 tests/lint/modules.py crates/*/src plugins/*/src tests/*/src || status=1
exit "$status"
