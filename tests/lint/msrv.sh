#!/usr/bin/env bash
# The workspace's rust-version must be true: no locked dependency (of any
# workspace crate, for Linux targets) may declare a newer one. Reads the
# declared versions from cargo metadata, so it needs no older toolchain.
set -euo pipefail

cd "$(dirname "$0")/../.."
cargo metadata --format-version 1 --locked --filter-platform x86_64-unknown-linux-gnu |
    python3 -c '
import json, sys

def key(v):
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))

meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
ours = {p["rust_version"] for p in meta["packages"] if p["id"] in members}
if len(ours) != 1 or None in ours:
    sys.exit(f"msrv: workspace crates declare {sorted(map(str, ours))}: expected one rust-version, from the workspace")
ours = ours.pop()
newer = sorted(
    (p["rust_version"], p["name"], p["version"])
    for p in meta["packages"]
    if p["id"] not in members and p.get("rust_version") and key(p["rust_version"]) > key(ours)
)
for rv, name, version in newer:
    print(f"msrv: {name} {version} needs Rust {rv}, newer than the workspace rust-version {ours}", file=sys.stderr)
if newer:
    sys.exit(1)
top = max((p.get("rust_version") or "0" for p in meta["packages"] if p["id"] not in members), key=key)
print(f"msrv: rust-version {ours} holds (the newest a dependency needs: {top})")
'
