#!/usr/bin/env bash
# containerd built with nri-rs, running containerd's own NRI end-to-end tests.
#
#   tests/e2e/containerd.sh               containerd with the Rust core swapped in
#   E2E_STOCK=1 tests/e2e/containerd.sh   the same, stock (upstream's Go pkg/adaptation)
#   E2E_BUILD_ONLY=1 tests/e2e/containerd.sh builds the daemon alone, prints "VERSION PATH"
#
# 1. fetches containerd $CONTAINERD_VERSION through the Go module proxy and
#    vendors it (cached in build/e2e/src);
# 2. builds the daemon with the command docs/INTEGRATION.md shows (containerd's
#    Makefile, GO_BUILD_FLAGS naming the overlay that replaces the files of
#    the vendored github.com/containerd/nri/pkg/adaptation by go/adaptation's;
#    stock: an empty overlay), checks that it links nri-rs (stock: that it
#    does not), and builds ctr, the runc shim and the CRI integration test
#    binary (cached in build/e2e/bin, keyed by version and inputs); cgo finds
#    the release libnri.a through pkg-config, from `make install`;
# 3. runs containerd's Go unit tests of internal/nri and internal/cri/nri;
# 4. builds the test images offline (busybox-static, a pause binary built
#    here) and starts containerd under a supervisor that restarts it, with
#    temp root/state dirs, NRI on /var/run/nri-test.sock, Debian's runc and
#    CNI plugins, restrict_oom_score_adj (no CAP_SYS_RESOURCE here);
# 5. runs TestNri* and TestUpdatePodSandboxWithRestart and prints
#    "e2e-containerd: N passed, N failed, N skipped";
# 6. runs critest's NRI specs against the same daemon, its image pulled
#    from a local registry mirroring registry.k8s.io, and for nri-rs once
#    more with per-pod concurrency on (E2E_CRITEST=0: not at all); prints
#    "critest-containerd-<flavour>: N passed, N failed, N skipped";
# 7. compares the counts with docs/e2e.json (E2E_RECORD=1: writes them);
# 8. tears everything down (also on failure or interrupt).
#
# Needs root, Go, cargo, gcc and the Debian packages runc,
# containernetworking-plugins, busybox-static (see .ci/run).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
nondefault CONTAINERD_VERSION v2.4.2
# The daemon's process name. The restart tests `pkill -x` and `pidof` it by
# name; a unique one (at most 15 characters) leaves any other containerd on
# the machine alone.
DAEMON=containerd-e2e
NRI_SOCKET=/var/run/nri-test.sock
BRIDGE=nrirs-e2e0
SUBNET=10.239.47.0/24
TESTS='^(TestNri.*|TestUpdatePodSandboxWithRestart)$'
BUSYBOX_IMAGE=ghcr.io/containerd/busybox:1.36
PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
PKG=github.com/containerd/containerd/v2

# The daemon is built as containerd's static release is (`make STATIC=1`:
# osusergo, netgo and static_build tags, -extldflags -static), the harder
# link for nri-rs; E2E_CONTAINERD_STATIC=0 builds the PIE daemon of a
# distribution build instead. CRI-O's e2e covers a dynamic daemon. Both
# commands are docs/INTEGRATION.md's, word for word (run_documented);
# EXTRA_LDFLAGS= keeps the symbol table (the Makefile strips with -s -w)
# for the check that the daemon links nri-rs.
E2E_CONTAINERD_STATIC=${E2E_CONTAINERD_STATIC:-1}
nondefault E2E_CONTAINERD_STATIC 1
# shellcheck disable=SC2016 # $SRC expands when the line runs
if [ "$E2E_CONTAINERD_STATIC" = 1 ]; then
    BUILD_DAEMON='make STATIC=1 bin/containerd EXTRA_LDFLAGS= GO_BUILD_FLAGS="-overlay=$SRC/nri-rs-overlay.json"'
else
    BUILD_DAEMON='make bin/containerd EXTRA_LDFLAGS= GO_BUILD_FLAGS="-overlay=$SRC/nri-rs-overlay.json"'
fi

t0=$(date +%s)
doc_check "$BUILD_DAEMON"
figures_precheck
need_common
if ! build_only; then
    need_cmd pkill procps # the restart tests kill the daemon by name
    need_cmd pidof sysvinit-utils
    grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
        die "the kernel has no overlay filesystem (containerd's overlayfs snapshotter needs it)"
fi

e2e_trap

# --- sources and builds --------------------------------------------------------
src=$(prepare_source containerd "$PKG" "$CONTAINERD_VERSION")
nri_version=$(vendored_version "$src" github.com/containerd/nri)
[ -n "$nri_version" ] || die "containerd $CONTAINERD_VERSION vendors no github.com/containerd/nri"
log "containerd $CONTAINERD_VERSION pins NRI $nri_version"

export GOFLAGS=-mod=vendor

# build_containerd BIN: with containerd's Makefile: the daemon (the
# documented command), PIE ctr, the static cgo-less shim; `go test -c` for
# the integration tests, as its cri-integration target does.
build_containerd() {
    local bin=$1
    cd "$SRC"
    # The runtime's make is no sub-make of nri-rs's `make e2e`.
    unset MAKEFLAGS MFLAGS MAKELEVEL
    # What the Makefile asks git for (a module zip has no .git).
    export VERSION=$CONTAINERD_VERSION REVISION=nri-rs-e2e
    run_documented "$BUILD_DAEMON"
    mv bin/containerd "$bin/$DAEMON"
    if build_only; then return; fi
    nice -n 10 make bin/ctr bin/containerd-shim-runc-v2 EXTRA_LDFLAGS= >&2
    mv bin/ctr bin/containerd-shim-runc-v2 "$bin/"
    nice -n 10 go test -c "${OVERLAY_FLAG[@]}" -o "$bin/cri-integration.test" ./integration
}

setup_flavor "containerd-$CONTAINERD_VERSION" "$src" "$nri_version"
bin=$(bin_dir "containerd-$CONTAINERD_VERSION")
build_cached "$bin" build_containerd "$CONTAINERD_VERSION $BUILD_DAEMON ${OVERLAY_FLAG[*]}"
if [ "$E2E_CONTAINERD_STATIC" = 1 ] && ldd "$bin/$DAEMON" >/dev/null 2>&1; then
    die "$bin/$DAEMON should be static but is dynamically linked"
fi
check_links_nri_rs "$bin/$DAEMON"
built_daemon "$CONTAINERD_VERSION" "$bin/$DAEMON"
build_secs=$BUILD_SECS
if [ "$E2E_CRITEST" = 1 ]; then build_critest; fi

# --- containerd's unit tests of its NRI glue ----------------------------------
tu=$(date +%s)
unit_log=$(mktemp)
on_exit_do rm -f "$unit_log"
log "running containerd's unit tests of internal/nri and internal/cri/nri ($(flavor))"
set +e
(cd "$src" && nice -n 10 go test -count=1 -v "${OVERLAY_FLAG[@]}" ./internal/nri/... ./internal/cri/nri/...) >"$unit_log" 2>&1
unit_rc=$?
set -e
grep -E '^(ok|FAIL|---|panic)' "$unit_log" | grep -vE '^--- PASS' | sed 's/^/e2e:   /' >&2 || true
unit_passed=$(grep -cE '^\s*--- PASS: ' "$unit_log" || true)
unit_failed=$(grep -cE '^\s*--- FAIL: ' "$unit_log" || true)
unit_skipped=$(grep -cE '^\s*--- SKIP: ' "$unit_log" || true)
if [ "$unit_rc" -ne 0 ] && [ "$unit_failed" = 0 ]; then
    tail -30 "$unit_log" >&2
    unit_failed=1
fi
unit_secs=$(($(date +%s) - tu))

# --- run containerd -------------------------------------------------------------
te=$(date +%s)
begin_run nrirs-containerd "$NRI_SOCKET" "$BRIDGE"
W=$E2E_WORK
mkdir -p "$W/opt"
test_images "$BUSYBOX_IMAGE" "$PAUSE_IMAGE"
cni_config "$BRIDGE" "$SUBNET"
registry_config=
if [ "$E2E_CRITEST" = 1 ]; then
    start_registry
    # registry.k8s.io is mirrored by the test registry (plain HTTP), and by
    # nothing else: nothing here reaches the real one.
    mkdir -p "$W/certs.d/registry.k8s.io"
    cat >"$W/certs.d/registry.k8s.io/hosts.toml" <<EOF
server = "https://registry.k8s.io"

[host."http://127.0.0.1:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
EOF
    registry_config="[plugins.\"io.containerd.cri.v1.images\".registry]
      config_path = \"$W/certs.d\""
fi

# containerd v2.4's own format (version 4, `containerd config default`).
cat >"$W/config.toml" <<EOF
version = 4
root = "$W/root"
state = "$W/state"
temp = "$W/tmp"
imports = []

[debug]
  level = "info"

[plugins]
  [plugins."io.containerd.server.v1.grpc"]
    address = "$W/containerd.sock"
  [plugins."io.containerd.server.v1.ttrpc"]
    address = "$W/containerd.sock.ttrpc"
  [plugins."io.containerd.shim.v1.manager"]
    socket_dir = "$W/s"
  [plugins."io.containerd.internal.v1.opt"]
    path = "$W/opt"

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "$PAUSE_IMAGE"
    $registry_config

  [plugins."io.containerd.cri.v1.runtime"]
    # These machines lack CAP_SYS_RESOURCE: without it runc cannot lower the
    # sandbox's oom_score_adj below containerd's own.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$W/runc"
          SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$W/cni"
      max_conf_num = 1

  [plugins."io.containerd.nri.v1.nri"]
    disable = false
    socket_path = "$NRI_SOCKET"
    plugin_path = "$W/nri/plugins"
    plugin_config_path = "$W/nri/conf.d"
EOF

# start_containerd LOG [VAR=VALUE...]: the daemon under the supervisor, the
# VARs in its environment.
start_containerd() {
    local logf=$1
    shift
    start_daemon containerd "$logf" "$NRI_SOCKET" "$bin/ctr" -a "$W/containerd.sock" version -- \
        env "$@" "$bin/$DAEMON" --config "$W/config.toml"
}

daemon_log=$W/containerd.log
export PATH=$bin:$PATH # the shim, for containerd; pkill and pidof for the tests
start_containerd "$daemon_log"

for img in busybox pause; do
    "$bin/ctr" -a "$W/containerd.sock" -n k8s.io images import --all-platforms "$W/images/$img.tar" \
        >"$W/ctr-import.log" 2>&1 || { cat "$W/ctr-import.log" >&2; die "importing the $img test image failed"; }
done

# TestNriLinuxCpusetAdjustmentUpdate is racy upstream, whatever the NRI
# core: its container rewrites /out/result every 0.2 s (the loop assigns
# cpus="$prev" where it means prev="$cpus", so the "changed" check never
# holds), and the test reads the file once; a read between the shell's
# truncate and write sees "" ('expected "Cpus_allowed_list:\t1\n", actual
# ""'). Seen once in about ten runs here. It gets one retry, reported.
E2E_RETRY_ONCE=TestNriLinuxCpusetAdjustmentUpdate
# (its TestMain connects to the daemon, even to list the tests)
run_tests "$bin/cri-integration.test" "$TESTS" \
    --cri-endpoint="unix://$W/containerd.sock" --containerd-bin="$DAEMON"
restarts=$(grep -c '^--- supervisor: daemon exited' "$daemon_log" || true)
e2e_secs=$(($(date +%s) - te))

# --- critest's NRI specs --------------------------------------------------------
# The same daemon, NRI configured by containerd's defaults (no timeout set:
# a 2 s request timeout; nri-rs gives a joining plugin's Synchronize a
# deadline of its own); for nri-rs once more, per-pod concurrency on.
run_critests containerd "unix://$W/containerd.sock" start_containerd

what=$(label "containerd $CONTAINERD_VERSION" "$nri_version")
[ "$E2E_CONTAINERD_STATIC" = 1 ] && what="$what, static daemon"
echo "$what: unit tests of internal/nri, internal/cri/nri (tests and subtests):"
echo "$(result_name containerd-unit): $unit_passed passed, $unit_failed failed, $unit_skipped skipped"
echo "$what: NRI integration tests (daemon restarted $restarts times by the supervisor):"
[ -z "$RETRIED" ] || echo "(passed on a retry: $RETRIED)"
echo "$(result_name e2e-containerd): $PASSED passed, $FAILED failed, $SKIPPED skipped"
if [ "$E2E_CRITEST" = 1 ]; then
    echo "$what: critest $CRITEST_VERSION NRI specs, containerd's default NRI configuration:"
    printf '%s\n' "${CRITEST_LINES[@]}"
fi
log "times: build ${build_secs}s, unit ${unit_secs}s, e2e ${e2e_secs}s${CRITEST_SECS:+, critest ${CRITEST_SECS}s}, total $(($(date +%s) - t0))s"
ok=0
[ "$FAILED" = 0 ] && [ "$unit_failed" = 0 ] && [ "$CRITEST_FAILED" = 0 ] && ok=1
check_figures containerd "$ok" "\"daemon\": \"containerd $CONTAINERD_VERSION\", \"unit\": $(counts_json "$unit_passed" "$unit_failed" "$unit_skipped"), \"nri_e2e\": $(counts_json "$PASSED" "$FAILED" "$SKIPPED")$CRITEST_JSON"
[ "$ok" = 1 ]
