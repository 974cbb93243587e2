#!/usr/bin/env bash
# A plugin crate outside this repository builds against nri-rs as crates.io
# would serve it. The crates are packaged (`cargo package --no-verify`: what
# crates.io would get) and unpacked into a temporary directory; a copy of
# plugins/template becomes a crate of its own there, with the Cargo.toml a
# plugin author writes (registry versions, no path, no workspace), and a
# [patch.crates-io] that points those versions at the unpacked packages in
# place of crates.io. It is built offline in a target directory of its own,
# with none of the workspace's build output, and `nri-template -h` must
# print its usage. Its tests run there too: they host the plugin in the
# test runtime (plugin_kit's "testing" feature, a dev-dependency), which is
# nri-rs's runtime core and so brings nri-runtime and nri-validator.
#
# Usage: tests/install/plugin-outside.sh   (from any directory)
#
# CARGO names cargo (default: cargo from PATH). Offline throughout: the
# third-party crates come from the local cargo registry cache, in the
# versions of the workspace's Cargo.lock.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cargo=${CARGO:-cargo}
work=$(mktemp -d)
# Physical path: cargo prints package paths resolved.
work=$(cd "$work" && pwd -P)
trap 'rm -rf "$work"' EXIT
start=$SECONDS

say() { echo "plugin-outside: $*"; }
fail() { echo "plugin-outside: $*" >&2; exit 1; }
# quiet LOG CMD...: run CMD with its output in LOG, shown only on failure.
quiet() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "failed: $*"; }
}

# Every crate meant for crates.io; the template needs the first five (the
# kit reads YAML with nri-yaml), its tests the next two. docs/plugins.md's
# [patch.crates-io] list is the same: an unused patch is a warning, which
# fails the build below.
crates=(nri-api nri-yaml nri-stub-macros nri-stub nri-plugin-kit nri-validator nri-runtime nri-spec nri-wasm nri-capi)
needed=(nri-api nri-yaml nri-stub-macros nri-stub nri-plugin-kit nri-validator nri-runtime)
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml")
[ -n "$version" ] || fail "no [workspace.package] version in $root/Cargo.toml"
# What an author outside asks for: "0.1" for 0.1.x.
requirement=${version%.*}

# 1. The packages, as `cargo publish` would upload them. --no-verify: a
# verifying build resolves each package's dependencies on crates.io,
# where ours are not (yet).
say "cargo package --no-verify (${#crates[@]} crates, version $version)"
package_args=()
for c in "${crates[@]}"; do package_args+=(-p "$c"); done
# From outside the tree: cargo reads .cargo/config.toml from the working
# directory up, and a tree unpacked from `make dist` replaces crates.io
# there with its vendor/ directory, where packaging would then look for
# the workspace's own crates.
(cd "$work" && quiet "$work/package.log" env CARGO_TARGET_DIR="$work/package-target" \
    "$cargo" package --manifest-path "$root/Cargo.toml" --no-verify --allow-dirty --offline "${package_args[@]}")
mkdir "$work/crates"
for c in "${crates[@]}"; do
    file="$work/package-target/package/$c-$version.crate"
    [ -f "$file" ] || fail "cargo package wrote no $c-$version.crate"
    tar -xzf "$file" -C "$work/crates"
done

# 2. The plugin crate: the template's sources, and a manifest whose
# dependencies are the template's, ours named by registry version.
plugin="$work/my-plugin"
mkdir "$plugin"
cp -R "$root/plugins/template/src" "$plugin/src"
# section NAME: the template's [NAME] lines, ours by registry version
# (`x.workspace = true` -> `x = "0.1"`, `x = { workspace = true, ...}` ->
# `x = { version = "0.1", ...}`), without comments and blank lines.
section() {
    sed -n "/^\[$1\]/,/^\[/{/^\[/d;/^$/d;/^#/d;p}" "$root/plugins/template/Cargo.toml" |
        sed -e "s/^\(nri-[a-z-]*\)\.workspace = true\$/\1 = \"$requirement\"/" \
            -e "s/^\(nri-[a-z-]*\) = { workspace = true/\1 = { version = \"$requirement\"/"
}
deps=$(section dependencies)
dev_deps=$(section dev-dependencies)
[ -n "$deps" ] || fail "plugins/template/Cargo.toml has no [dependencies]"
if grep -q 'workspace\|path' <<<"$deps$dev_deps"; then
    fail "the template depends on something outside crates.io: $(grep 'workspace\|path' <<<"$deps$dev_deps")"
fi
{
    cat <<TOML
[package]
name = "nri-template"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
$deps

[dev-dependencies]
$dev_deps

# Stands in for crates.io: the packages cargo package made, unpacked.
[patch.crates-io]
TOML
    for c in "${needed[@]}"; do
        echo "$c = { path = \"../crates/$c-$version\" }"
    done
} >"$plugin/Cargo.toml"
# The versions the workspace builds with, all in the registry cache.
cp "$root/Cargo.lock" "$plugin/Cargo.lock"

# 3. Build it outside: its own target directory, nothing of the workspace's.
cd "$plugin"
export CARGO_TARGET_DIR="$work/target" CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=0
say "cargo build --offline (a copy of plugins/template on the packages only)"
step=$SECONDS
quiet "$work/build.log" "$cargo" build --offline
build_time=$((SECONDS - step))
if grep -q '^warning' "$work/build.log"; then
    cat "$work/build.log" >&2
    fail "the outside build has warnings"
fi

# Every nri crate in its graph is an unpacked package, none of the runtime
# side or the validator is among them (the test runtime is for tests only).
tree=$("$cargo" tree --offline -e normal,build --prefix none | sed 's/ (\*)$//' | sort -u)
nri=$(grep '^nri-' <<<"$tree" || true)
while IFS= read -r line; do
    case "$line" in
    "nri-template v"*) ;;
    *"($work/crates/"*) ;;
    *) fail "not from the unpacked packages: $line" ;;
    esac
done <<<"$nri"
for bad in nri-runtime nri-spec nri-capi nri-validator; do
    if grep -q "^$bad v" <<<"$nri"; then fail "the plugin depends on $bad"; fi
done

# 4. It runs: -h prints the usage (Go's flag package's format) and exits 0.
usage=$("$CARGO_TARGET_DIR/debug/nri-template" -h 2>&1) ||
    { printf '%s\n' "$usage" >&2; fail "nri-template -h failed"; }
for want in "Usage of nri-template:" "-name" "-idx" "-socket"; do
    grep -qF -- "$want" <<<"$usage" || { printf '%s\n' "$usage" >&2; fail "nri-template -h: no '$want'"; }
done
printf '%s\n' "$usage" | sed 's/^/    /'

# 5. Its tests, in the test runtime built from the packages.
say "cargo test --offline (the template's tests, on the packaged test runtime)"
step=$SECONDS
quiet "$work/test.log" "$cargo" test --offline
test_time=$((SECONDS - step))
grep -q '^warning' "$work/test.log" && { cat "$work/test.log" >&2; fail "the outside test build has warnings"; }
grep '^test result:' "$work/test.log" | sed 's/^/    /'

say "ok: a plugin outside the repository builds on the packaged crates" \
    "($(grep -c . <<<"$nri") nri crates), runs, and its tests pass, in $((SECONDS - start))s" \
    "(plugin build ${build_time}s; tests, with the test runtime's crates, ${test_time}s more)"
