#!/usr/bin/env bash
# Runs cargo-deny on the workspace with the policy in deny.toml: licenses,
# bans (duplicate versions, wildcards) and sources always; advisories when
# the RustSec advisory database can be had, since it lives in a git
# repository that not every machine reaches.
#
#   NRI_DENY_ADVISORIES=auto  (default) fetch the database; checked if that
#                             works, else from an earlier fetch if one is
#                             cached, else skipped with a notice
#   NRI_DENY_ADVISORIES=yes   fail when the database cannot be fetched
#   NRI_DENY_ADVISORIES=no    do not check advisories
#
# CARGO_DENY names the binary (default: cargo-deny from PATH; the Makefile
# passes the pinned one it installs). Uses Cargo.lock as it is (--locked).
set -euo pipefail

cd "$(dirname "$0")/../.."
deny=${CARGO_DENY:-cargo-deny}
mode=${NRI_DENY_ADVISORIES:-auto}
case "$mode" in auto | yes | no) ;; *) echo "deny.sh: NRI_DENY_ADVISORIES must be auto, yes or no, not '$mode'" >&2; exit 2 ;; esac
command -v "$deny" >/dev/null ||
    { echo "deny.sh: $deny not found: cargo install --locked cargo-deny (make lint installs the pinned version)" >&2; exit 1; }

echo "deny.sh: $("$deny" --version)"
"$deny" --locked check licenses bans sources

if [ "$mode" = no ]; then
    echo "deny.sh: advisories not checked (NRI_DENY_ADVISORIES=no)"
    exit 0
fi
# The fetch fails at once where the host does not resolve; the limit is for
# a network that swallows the connection instead.
if timeout 180 "$deny" fetch db; then
    # Just fetched: do not fetch again.
    "$deny" --locked --offline check advisories
    exit 0
fi
if [ "$mode" = yes ]; then
    echo "deny.sh: FAILED: the RustSec advisory database could not be fetched (NRI_DENY_ADVISORIES=yes)" >&2
    exit 1
fi
if compgen -G "${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/*/.git" >/dev/null; then
    echo "deny.sh: the RustSec advisory database could not be fetched: checking against the copy cached by an earlier fetch" >&2
    "$deny" --locked --offline check advisories
    exit 0
fi
echo "deny.sh: advisories NOT checked: the RustSec advisory database cannot be fetched from this machine and none is cached" >&2
