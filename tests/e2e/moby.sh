#!/usr/bin/env bash
# Docker Engine (moby) built with nri-rs, running moby's own NRI tests.
#
#   tests/e2e/moby.sh               both flavours, one run after the other:
#                                   the stock dockerd, then dockerd with nri-rs
#   E2E_STOCK=1 tests/e2e/moby.sh   the stock dockerd only
#   E2E_STOCK=0 tests/e2e/moby.sh   dockerd with nri-rs only
#
# A run of one flavour:
# 1. fetches moby $MOBY_VERSION (Go module github.com/moby/moby/v2) through
#    the Go module proxy and vendors it (cached in build/e2e/src);
# 2. builds dockerd as moby's `hack/make.sh binary` does (static; tags
#    netgo osusergo static_build nri_no_wasm) and the integration/daemon/nri
#    test binary; the nri-rs flavour with `go build -overlay` replacing the
#    files of the vendored github.com/containerd/nri/pkg/adaptation by
#    go/adaptation's (cached in build/e2e/bin, keyed by version and inputs);
# 3. runs moby's unit tests of daemon/internal/nri;
# 4. starts what moby's integration framework expects to find, all of it
#    in a scratch directory but containerd's socket (the fixed path moby's
#    test daemons dial) and the docker0 bridge: containerd (the containerd
#    e2e's build, CRI and NRI off) with runc $RUNC_VERSION (built here), and
#    a "main" dockerd of the flavour, NRI on, holding the frozen images
#    (busybox built offline, under every name the framework checks);
# 5. runs integration/daemon/nri, whose tests start dockerd daemons of their
#    own (the flavour's, from PATH) with NRI enabled and stub plugins in the
#    test process, and prints "e2e-moby: N passed, N failed, N skipped";
# 6. tears everything down (also on failure or interrupt).
#
# Needs root, Go, cargo, gcc, curl and the Debian packages libseccomp-dev,
# pkg-config, busybox-static, libc6-dev, iproute2, procps (not installed by
# .ci/run: CI does not run this; docs/INTEGRATION.md says why).

# Before lib.sh gives E2E_STOCK its default: was a flavour asked for?
E2E_MOBY_ONE_FLAVOUR=${E2E_STOCK:+1}
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

# v2.0.0-beta.25 is the newest moby the module proxy lists, but it pins
# github.com/moby/extensions v0.0.0-20260918151408-e4c23d866037, which the
# proxy refuses ("not available"): `go mod vendor` cannot complete. beta.24
# is the newest release whose whole module graph is served. Its
# daemon/internal/nri and integration/daemon/nri are beta.25's, file for
# file, and it pins the same NRI, v0.12.3.
MOBY_VERSION=${MOBY_VERSION:-v2.0.0-beta.24}
# The containerd the daemons run on (containerd.sh builds it).
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
# The runc moby's Dockerfile pins. Debian bookworm's runc 1.1.5 cannot run
# a moby v2 container: dockerd puts it in a time namespace (runc 1.2+).
RUNC_VERSION=${RUNC_VERSION:-v1.5.1}
PKG=github.com/moby/moby/v2
# moby's test daemons (internal/testutil/daemon) always dial the containerd
# a main dockerd would have started, at this fixed path.
CONTAINERD_SOCKET=/var/run/docker/containerd/containerd.sock
# The main daemon's NRI socket: the path the other e2e runs use (the
# run's lock keeps them apart).
NRI_SOCKET=/var/run/nri-test.sock
# The default bridge, shared by every dockerd of the run (its name is
# fixed); the main daemon creates it with this address.
BRIDGE=docker0
BRIDGE_IP=10.239.49.1/24
TESTS='^TestNRI'
# The frozen images moby's TestMain makes sure the main daemon holds
# (internal/testutil/environment); when all are there it pulls nothing.
FROZEN_IMAGES="busybox:latest busybox:glibc hello-world:frozen debian:trixie-slim hello-world:amd64 hello-world:arm64"
# The cgroups dockerd makes with cgroupfs: its parent and the containers'.
E2E_CGROUP_NAMES='docker|[0-9a-f]{64}'

t0=$(date +%s)
need_root
need_cmd go "golang (Go 1.26+)"
need_cmd cargo "rust (rustup)"
need_cmd gcc gcc
need_static_libc
need_cmd pkg-config pkg-config
pkg-config --exists libseccomp 2>/dev/null ||
    die "libseccomp not found by pkg-config (runc is built with seccomp): install the Debian package libseccomp-dev"
need_cmd busybox busybox-static
need_cmd curl curl
need_cmd ip iproute2
need_cmd ss iproute2
need_cmd pgrep procps
need_cmd flock util-linux
need_cgroups
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
    die "the kernel has no overlay filesystem (dockerd's default snapshotter needs it)"

# Both flavours: each is a run of its own (its lock, scratch directory and
# teardown), the stock one first, so that its result is there to compare.
if [ -z "$E2E_MOBY_ONE_FLAVOUR" ]; then
    rc=0
    for stock in 1 0; do
        E2E_STOCK=$stock "$0" || rc=1
    done
    log "both flavours: $(($(date +%s) - t0))s"
    exit "$rc"
fi

e2e_trap

# --- sources and builds --------------------------------------------------------
src=$(prepare_source moby "$PKG" "$MOBY_VERSION")
nri_version=$(vendored_version "$src" github.com/containerd/nri)
[ -n "$nri_version" ] || die "moby $MOBY_VERSION vendors no github.com/containerd/nri"
log "moby $MOBY_VERSION pins NRI $nri_version"

export GOFLAGS=-mod=vendor
# hack/make.sh and hack/make/.go-autogen, less what needs a git checkout.
ld="-w -X $PKG/dockerversion.Version=${MOBY_VERSION#v} -X $PKG/dockerversion.GitCommit=nri-rs-e2e"
tags="netgo osusergo static_build nri_no_wasm"

# build_moby BIN: the static dockerd of `hack/make.sh binary`, and the
# integration test binary built with the same flags, as
# hack/make/.integration-test-helpers builds it.
build_moby() {
    local bin=$1
    cd "$src"
    nice -n 10 go build -tags "$tags" -ldflags "$ld -extldflags -static" "${OVERLAY_FLAG[@]}" \
        -o "$bin/dockerd" ./cmd/dockerd
    nice -n 10 go test -c -tags "$tags" -ldflags "$ld" "${OVERLAY_FLAG[@]}" \
        -o "$bin/nri.test" ./integration/daemon/nri
}

setup_flavor "moby-$MOBY_VERSION" "$src" "$nri_version"
bin=$E2E_BUILD/bin/moby-$MOBY_VERSION-$(flavor)
build_cached "$bin" build_moby "$MOBY_VERSION $ld $tags ${OVERLAY_FLAG[*]}"
ldd "$bin/dockerd" >/dev/null 2>&1 && die "$bin/dockerd should be static but is dynamically linked"
check_links_nri_rs "$bin/dockerd"
build_secs=$BUILD_SECS

# containerd_runtime: CTRD_BIN, a directory holding a containerd daemon
# (containerd-e2e) and its runc shim. A build of containerd.sh's is reused
# as it is, whichever flavour: this containerd runs with its own NRI off.
# Without one, those two are built here from the same source, stock.
build_containerd_runtime() {
    local bin=$1
    cd "$ctrd_src"
    nice -n 10 go build -tags "urfave_cli_no_docs osusergo netgo static_build" \
        -ldflags "-extldflags -static" -o "$bin/containerd-e2e" ./cmd/containerd
    CGO_ENABLED=0 nice -n 10 go build -tags "urfave_cli_no_docs no_grpc" \
        -ldflags "-extldflags -static" -o "$bin/containerd-shim-runc-v2" ./cmd/containerd-shim-runc-v2
}
containerd_runtime() {
    local f d
    for f in $(flavor) stock nri-rs; do
        d=$E2E_BUILD/bin/containerd-$CONTAINERD_VERSION-$f
        if [ -f "$d/.key" ] && [ -x "$d/containerd-e2e" ] && [ -x "$d/containerd-shim-runc-v2" ]; then
            CTRD_BIN=$d
            log "containerd: containerd.sh's $CONTAINERD_VERSION build in $d"
            return
        fi
    done
    CTRD_BIN=$E2E_BUILD/bin/containerd-$CONTAINERD_VERSION-for-moby
    ctrd_src=$(prepare_source containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION")
    (
        E2E_STOCK=1
        stock_env
        build_cached "$CTRD_BIN" build_containerd_runtime "$CONTAINERD_VERSION"
    )
}
# build_runc BIN: runc as its Makefile builds it (cgo, seccomp), dynamic.
build_runc() {
    local bin=$1
    cd "$runc_src"
    nice -n 10 go build -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs" \
        -ldflags "-X main.version=${RUNC_VERSION#v} -X main.gitCommit=nri-rs-e2e" -o "$bin/runc" .
}
tc=$(date +%s)
containerd_runtime
runc_src=$(prepare_source runc github.com/opencontainers/runc "$RUNC_VERSION")
runc_bin=$E2E_BUILD/bin/runc-$RUNC_VERSION
(
    E2E_STOCK=1
    stock_env
    build_cached "$runc_bin" build_runc "$RUNC_VERSION"
)
runtime_secs=$(($(date +%s) - tc))

# --- moby's unit tests of its NRI glue -------------------------------------------
tu=$(date +%s)
unit_log=$(mktemp)
on_exit_do rm -f "$unit_log"
log "running moby's unit tests of daemon/internal/nri ($(flavor))"
set +e
(cd "$src" && nice -n 10 go test -count=1 -v -tags netgo "${OVERLAY_FLAG[@]}" ./daemon/internal/nri/...) >"$unit_log" 2>&1
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

# --- containerd and the main dockerd ----------------------------------------------
te=$(date +%s)
# A Docker running on this machine would share the default bridge and the
# containerd socket with moby's test daemons: refuse to run beside it. The
# dockerd processes of another run of this script make it wait for the lock.
for pid in $(pgrep -x dockerd || true); do
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
    case "$exe" in
    */build/e2e/bin/moby-*/dockerd) ;;
    *) die "a dockerd runs here (pid $pid, $exe): stop it first; moby's test daemons would share its $BRIDGE and containerd socket" ;;
    esac
done
# The lock, the main daemon's NRI socket, the bridge (one left by an
# interrupted run is removed) and the scratch directory.
begin_run nrirs-moby "$NRI_SOCKET" "$BRIDGE"
W=$E2E_WORK
mkdir -p "$W/bin" "$W/containerd" "$W/main" "$W/dest" "$W/t"

# claim_fixed_socket SOCK: refused while something listens on it; the
# directories made for it are removed at exit, if empty by then.
claim_fixed_socket() {
    local sock=$1 d made=()
    if [ -S "$sock" ] && ss -xl 2>/dev/null | grep -qF " $sock "; then
        die "$sock is in use: a Docker daemon's containerd runs here"
    fi
    d=$(dirname "$sock")
    while [ ! -d "$d" ]; do
        made+=("$d")
        d=$(dirname "$d")
    done
    mkdir -p "$(dirname "$sock")"
    rm -f "$sock"
    for d in "${made[@]}"; do on_exit_do remove_empty_dirs "$d"; done
    on_exit_do rm -f "$sock"
}
# remove_empty_dirs DIR: DIR and the directories under it, as long as they
# hold nothing else (dockerd adds /var/run/docker/plugins).
remove_empty_dirs() {
    [ -d "$1" ] || return 0
    find "$1" -depth -type d -empty -delete 2>/dev/null || true
    [ ! -e "$1" ] || log "teardown: $1 kept: something else put files there"
}
claim_fixed_socket "$CONTAINERD_SOCKET"

# Containers the daemons left behind (a test binary killed midway): dockerd
# gives runc the root <exec root>/runtime-runc, and the shim adds the
# namespace. Runs once the daemons are stopped, before the teardown.
delete_left_containers() {
    local roots
    mapfile -t roots < <(find "$W" -maxdepth 6 -type d -path '*/runtime-runc*' 2>/dev/null)
    force_delete_containers "${roots[@]}"
}
on_exit_do delete_left_containers

# containerd, its shim and runc run from the scratch directory, so that the
# teardown finds any process of theirs left behind (it looks for processes
# whose executable or command line lies there).
for f in "$CTRD_BIN/containerd-e2e" "$CTRD_BIN/containerd-shim-runc-v2" "$runc_bin/runc"; do
    ln -f "$f" "$W/bin/" 2>/dev/null || cp "$f" "$W/bin/"
done
cat >"$W/containerd/config.toml" <<EOF
version = 4
root = "$W/containerd/root"
state = "$W/containerd/state"
temp = "$W/containerd/tmp"
# dockerd needs images, content, snapshots and tasks; not CRI, and not
# containerd's own NRI (the NRI under test is dockerd's).
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.nri.v1.nri"]

[debug]
  level = "info"

[plugins]
  [plugins."io.containerd.server.v1.grpc"]
    address = "$CONTAINERD_SOCKET"
  [plugins."io.containerd.server.v1.ttrpc"]
    address = "$W/containerd/ttrpc.sock"
  [plugins."io.containerd.shim.v1.manager"]
    socket_dir = "$W/containerd/s"
  [plugins."io.containerd.internal.v1.opt"]
    path = "$W/containerd/opt"
EOF

# On PATH: dockerd for the test daemons, the shim for containerd, runc for
# both (and for the teardown).
export PATH=$bin:$W/bin:$PATH
ctrd_log=$W/containerd.log
: >"$ctrd_log"
log "starting containerd ($CTRD_BIN)"
supervise "$ctrd_log" "$W/bin/containerd-e2e" --config "$W/containerd/config.toml"
# Two supervisors: lib.sh's exit step stops the newest one (dockerd's);
# containerd's is stopped after that, by this step registered before it.
ctrd_supervisor=$E2E_SUPERVISOR
stop_containerd_supervisor() {
    E2E_SUPERVISOR=$ctrd_supervisor
    stop_supervisor
}
on_exit_do stop_containerd_supervisor
wait_for 60 containerd test -S "$CONTAINERD_SOCKET" ||
    { tail -40 "$ctrd_log" >&2; die "containerd did not come up"; }

# The main dockerd: what moby's TestMain queries (DOCKER_HOST) and where
# the test daemons copy busybox from. NRI on, so that its log shows which
# NRI the flavour runs. No iptables (the tests' daemons use none either)
# and no userland proxy (docker-proxy is not built).
export DOCKER_HOST=unix://$W/main/docker.sock
echo '{}' >"$W/main/daemon.json"
main_log=$W/dockerd-main.log
start_daemon dockerd "$main_log" "$NRI_SOCKET" \
    curl -sf --unix-socket "$W/main/docker.sock" http://d/_ping -- \
    "$bin/dockerd" --debug --config-file "$W/main/daemon.json" \
    --host "$DOCKER_HOST" --data-root "$W/main/root" --exec-root "$W/main/exec" \
    --pidfile "$W/main/docker.pid" --containerd "$CONTAINERD_SOCKET" \
    --containerd-namespace nrirs-main --containerd-plugins-namespace nrirs-mainp \
    --iptables=false --ip6tables=false --userland-proxy=false --bip "$BRIDGE_IP" \
    --nri-opts "enable=true,socket-path=$NRI_SOCKET,plugin-path=$W/nri/plugins,plugin-config-path=$W/nri/conf.d"

# The frozen images: busybox under each name, loaded through the API.
busybox_rootfs "$W/images/busybox"
for img in $FROZEN_IMAGES; do
    oci_archive "$W/images/frozen.tar" "docker.io/library/$img" "$W/images/busybox" /bin/sh
    curl -sf --unix-socket "$W/main/docker.sock" -X POST -H 'Content-Type: application/x-tar' \
        --data-binary "@$W/images/frozen.tar" "http://d/images/load?quiet=1" >"$W/images/load.json" ||
        die "loading $img into the main dockerd failed"
    if grep -q '"error' "$W/images/load.json"; then
        cat "$W/images/load.json" >&2
        die "loading $img into the main dockerd failed"
    fi
    curl -sf --unix-socket "$W/main/docker.sock" "http://d/images/$img/json" >/dev/null ||
        die "the main dockerd does not know $img after loading it"
done
rm -f "$W/images/frozen.tar"

# --- moby's NRI integration tests ---------------------------------------------------
# The test daemons live in DEST; their exec roots and sockets, and the
# tests' temporary directories (their NRI sockets among them), in TMPDIR.
# TestNRIReload builds a plugin with `go build ./testdata/...`, so the test
# binary runs in its package's directory, as `go test` runs it (lib.sh's
# runs it in the scratch directory), with GOFLAGS=-mod=vendor.
test_dir=$src/integration/daemon/nri
go_test_binary() {
    local tbin=$1 re=$2 logf=$3 rc
    shift 3
    set +e
    (cd "$test_dir" && DEST=$W/dest TMPDIR=$W/t DOCKER_USERLANDPROXY=false \
        exec timeout 900 "$tbin" -test.v -test.count=1 -test.run "$re" -test.timeout 14m "$@") \
        >"$logf" 2>&1 &
    wait $!
    rc=$?
    set -e
    [ "${E2E_VERBOSE:-0}" = 1 ] && cat "$logf" >&2
    return "$rc"
}
run_tests "$bin/nri.test" "$TESTS"
subtests=$(grep -cE '^\s+--- (PASS|FAIL|SKIP): ' "$W/tests.log" || true)

# Each test daemon enabled NRI, at start or (TestNRIReload) on a reload,
# and so created a runtime interface: the nri-rs flavour's must each have
# said so with nri-rs's line, the stock ones never.
mapfile -t daemon_logs < <(find "$W/dest" -name docker.log | sort)
nri_daemons=0
nri_rs_daemons=0
for f in "${daemon_logs[@]}"; do
    grep -q 'runtime interface created' "$f" && nri_daemons=$((nri_daemons + 1))
    grep -q 'runtime interface created (nri-rs ' "$f" && nri_rs_daemons=$((nri_rs_daemons + 1))
done
log "${#daemon_logs[@]} test daemons, $nri_daemons created a runtime interface, $nri_rs_daemons of them nri-rs's"
if [ "$nri_daemons" = 0 ] || [ "$nri_daemons" != "${#daemon_logs[@]}" ]; then
    log "not every test daemon created a runtime interface"
    FAILED=$((FAILED + 1))
elif [ "$(flavor)" = nri-rs ] && [ "$nri_rs_daemons" != "$nri_daemons" ]; then
    log "only $nri_rs_daemons of the $nri_daemons test daemons logged nri-rs's start-up line"
    FAILED=$((FAILED + 1))
elif [ "$(flavor)" = stock ] && [ "$nri_rs_daemons" != 0 ]; then
    log "$nri_rs_daemons stock test daemons logged nri-rs's start-up line"
    FAILED=$((FAILED + 1))
fi
[ "$FAILED" = 0 ] || E2E_KEEP=1
# Logs kept: the test daemons' too, beside the others (the teardown keeps
# the scratch directory's top-level *.log).
if [ "${E2E_KEEP:-0}" = 1 ]; then
    for f in "${daemon_logs[@]}"; do
        cp "$f" "$W/dockerd-$(basename "$(dirname "$(dirname "$f")")")-$(basename "$(dirname "$f")").log"
    done
fi
e2e_secs=$(($(date +%s) - te))

what=$(label "moby $MOBY_VERSION" "$nri_version")
echo "$what: unit tests of daemon/internal/nri (tests and subtests):"
echo "$(result_name moby-unit): $unit_passed passed, $unit_failed failed, $unit_skipped skipped"
echo "$what: NRI integration tests (integration/daemon/nri, with $subtests subtests):"
[ -z "$RETRIED" ] || echo "(passed on a retry: $RETRIED)"
echo "$(result_name e2e-moby): $PASSED passed, $FAILED failed, $SKIPPED skipped"
log "times: build ${build_secs}s, containerd and runc ${runtime_secs}s, unit ${unit_secs}s, e2e ${e2e_secs}s, total $(($(date +%s) - t0))s"
[ "$FAILED" = 0 ] && [ "$unit_failed" = 0 ]
