#!/usr/bin/env bash
# Writes OUT_DIR/nri-rs-VERSION.tar.gz and its .sha256: the source tree
# with every third-party Rust crate and Go module in it, so that the
# tarball builds and passes `make check` with no network (docs/PACKAGING.md).
#
# The tree is the working tree as git sees it: tracked files as they are
# on disk (a tracked file deleted on disk is left out) and untracked files
# that .gitignore does not ignore. A developer's `make test` then tests the
# edits it is run on; a release is made from a clean checkout of its tag
# (the script warns when the tree differs from HEAD).
#
# Vendored: the crates of Cargo.lock and fuzz/Cargo.lock (`cargo vendor`
# into vendor/, the source replacement in .cargo/config.toml), the modules
# of go/ and go/tests/ (`go mod vendor`). Network is needed only for what
# the local cargo registry and Go module cache lack.
#
# usage: dist.sh VERSION OUT_DIR
set -euo pipefail
version=${1:?usage: dist.sh VERSION OUT_DIR}
out=${2:?usage: dist.sh VERSION OUT_DIR}
cargo=${CARGO:-cargo}
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
name=nri-rs-$version
cd "$root"

say() { echo "dist: $*"; }

[ -d .git ] || [ -f .git ] || { echo "dist: $root is not a git checkout (make dist packs what git tracks)" >&2; exit 1; }
if [ -n "$(git status --porcelain --untracked-files=normal)" ]; then
    say "warning: the tree differs from HEAD; its working-tree state is packed"
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$out/stage
rm -rf "$stage" "$out/$name.tar.gz" "$out/$name.tar.gz.sha256"
mkdir -p "$stage/$name"

# The files, copied with their modes (tar keeps the executable bits).
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$stage/$name"

cd "$stage/$name"
if [ -e .cargo/config.toml ]; then
    echo "dist: .cargo/config.toml exists in the tree; the vendored sources would need merging into it" >&2
    exit 1
fi
say "cargo vendor (Cargo.lock, fuzz/Cargo.lock)"
mkdir -p .cargo
{
    echo "# Written by make dist: crates.io's crates come from vendor/, so that"
    echo "# this tree builds with no network (docs/PACKAGING.md)."
    "$cargo" vendor --locked --sync fuzz/Cargo.toml vendor
} >.cargo/config.toml 2>"$stage/vendor.log" || { cat "$stage/vendor.log" >&2; exit 1; }
grep -q '^replace-with = "vendored-sources"' .cargo/config.toml ||
    { echo "dist: cargo vendor wrote no source replacement:" >&2; cat .cargo/config.toml >&2; exit 1; }
for m in go go/tests; do
    say "go mod vendor ($m)"
    (cd "$m" && GOFLAGS=-mod=mod "$go" mod vendor)
done

# Reproducible for the same inputs: names sorted, owner and times fixed
# (the last commit's time), gzip without a name or time stamp.
mtime=$(git -C "$root" log -1 --format=%ct)
cd "$stage"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -cf - "$name" | gzip -9n >"$out/$name.tar.gz"
cd "$out"
rm -rf "$stage"
sha256sum "$name.tar.gz" >"$name.tar.gz.sha256"
say "$out/$name.tar.gz ($(du -h "$name.tar.gz" | cut -f1)): $(cut -d' ' -f1 "$name.tar.gz.sha256")"
