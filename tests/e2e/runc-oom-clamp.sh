#!/usr/bin/env bash
# CRI-O's runtime_path in the e2e: runc, with an OCI bundle's
# process.oomScoreAdj raised to this process's own score when it is lower.
#
# CRI-O gives every pod's infra container an oom_score_adj of -998. Lowering
# a score below the one inherited needs CAP_SYS_RESOURCE, which the machines
# this runs on do not grant even to root, so runc's init fails with
# "failed to update /proc/self/oom_score_adj: Permission denied". containerd
# has restrict_oom_score_adj for this case (clamp to the daemon's own
# score); CRI-O v1.36 has no configuration option that changes the infra
# container's score (only its undocumented rootless mode drops it, together
# with device rules and resource limits), so the clamp is done here, on
# `create` and `run` only; every other command goes to runc unchanged.
set -euo pipefail

RUNC=${E2E_RUNC:-runc}
cmd=''
bundle=''
prev=''
for a in "$@"; do
    case "$prev" in --bundle | -b) bundle=$a ;; esac
    case "$a" in
    --bundle=*) bundle=${a#--bundle=} ;;
    create | run) [ -n "$cmd" ] || cmd=$a ;;
    esac
    prev=$a
done
if [ -n "$cmd" ] && [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
    own=$(cat /proc/self/oom_score_adj)
    cur=$(grep -oE '"oomScoreAdj":[[:space:]]*-?[0-9]+' "$bundle/config.json" | grep -oE -- '-?[0-9]+$' || true)
    if [ -n "$cur" ] && [ "$cur" -lt "$own" ]; then
        sed -i -E "s/\"oomScoreAdj\":[[:space:]]*-?[0-9]+/\"oomScoreAdj\":$own/" "$bundle/config.json"
    fi
fi
exec "$RUNC" "$@"
