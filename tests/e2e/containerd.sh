#!/usr/bin/env bash
# containerd built with nri-rs, running containerd's own NRI end-to-end tests.
#
#   tests/e2e/containerd.sh               containerd with the Rust core swapped in
#   E2E_STOCK=1 tests/e2e/containerd.sh   the same, stock (upstream's Go pkg/adaptation)
#
# 1. fetches containerd $CONTAINERD_VERSION through the Go module proxy and
#    vendors it (cached in build/e2e/src);
# 2. builds containerd, ctr, the runc shim and the CRI integration test
#    binary; the nri-rs flavor with `go build -overlay` replacing the files of
#    the vendored github.com/containerd/nri/pkg/adaptation by go/adaptation's,
#    cgo pointed at include/ and the release libnri.a (cached in build/e2e/bin,
#    keyed by version and inputs);
# 3. runs containerd's Go unit tests of internal/nri and internal/cri/nri;
# 4. builds the test images offline (busybox-static, a pause binary built
#    here) and starts containerd under a supervisor that restarts it, with
#    temp root/state dirs, NRI on /var/run/nri-test.sock, Debian's runc and
#    CNI plugins, restrict_oom_score_adj (no CAP_SYS_RESOURCE here);
# 5. runs TestNri* and TestUpdatePodSandboxWithRestart and prints
#    "e2e-containerd: N passed, N failed, N skipped";
# 6. tears everything down (also on failure or interrupt).
#
# Needs root, Go, cargo, gcc and the Debian packages runc,
# containernetworking-plugins, busybox-static (see .ci/run).
source "$(dirname "$0")/lib.sh"

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
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

t0=$(date +%s)
need_root
need_cmd go "golang (Go 1.26+)"
need_cmd cargo "rust (rustup)"
need_cmd gcc gcc
need_static_libc
need_cmd runc runc
need_cmd busybox busybox-static
need_file /usr/lib/cni/bridge containernetworking-plugins
need_file /usr/lib/cni/host-local containernetworking-plugins
need_file /usr/lib/cni/loopback containernetworking-plugins
need_cmd pkill procps
need_cmd pidof sysvinit-utils
need_cmd ip iproute2
need_cgroups
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
    die "the kernel has no overlay filesystem (containerd's overlayfs snapshotter needs it)"

e2e_trap
flavor=$(flavor)

# --- sources and builds --------------------------------------------------------
src=$(prepare_source containerd "$PKG" "$CONTAINERD_VERSION")
nri_version=$(vendored_version "$src" github.com/containerd/nri)
[ -n "$nri_version" ] || die "containerd $CONTAINERD_VERSION vendors no github.com/containerd/nri"
log "containerd $CONTAINERD_VERSION pins NRI $nri_version"

export GOFLAGS=-mod=vendor
ld="-X $PKG/version.Version=$CONTAINERD_VERSION -X $PKG/version.Revision=nri-rs-e2e -X $PKG/version.Package=$PKG"

# build_containerd BIN: as containerd's Makefile does it: PIE daemon and
# tools, a static cgo-less shim; `go test -c` for the integration tests.
build_containerd() {
    local bin=$1
    cd "$src"
    nice -n 10 go build -buildmode=pie -tags urfave_cli_no_docs -ldflags "$ld" "${overlay_flag[@]}" \
        -o "$bin/$DAEMON" ./cmd/containerd
    nice -n 10 go build -buildmode=pie -tags urfave_cli_no_docs -ldflags "$ld" -o "$bin/ctr" ./cmd/ctr
    CGO_ENABLED=0 nice -n 10 go build -tags "urfave_cli_no_docs no_grpc" \
        -ldflags "$ld -extldflags -static" -o "$bin/containerd-shim-runc-v2" ./cmd/containerd-shim-runc-v2
    nice -n 10 go test -c "${overlay_flag[@]}" -o "$bin/cri-integration.test" ./integration
}

overlay_flag=()
if [ "$flavor" = nri-rs ]; then
    nri_rs_env
    overlay=$E2E_BUILD/overlay-containerd-$CONTAINERD_VERSION.json
    write_overlay "$src" "$nri_version" "$overlay"
    overlay_flag=(-overlay "$overlay")
else
    stock_env
fi
bin=$E2E_BUILD/bin/containerd-$CONTAINERD_VERSION-$flavor
build_cached "$bin" build_containerd "$CONTAINERD_VERSION $ld ${overlay_flag[*]}"
if [ "$flavor" = nri-rs ]; then
    # The swap must be real: the daemon links the Rust core.
    [ "$(go tool nm "$bin/$DAEMON" | grep -c ' nri_adaptation_new$')" != 0 ] ||
        die "$bin/$DAEMON does not link nri_adaptation_new: the overlay was not applied"
fi
build_secs=$BUILD_SECS

# --- containerd's unit tests of its NRI glue ----------------------------------
tu=$(date +%s)
unit_log=$(mktemp)
on_exit_do rm -f "$unit_log"
log "running containerd's unit tests of internal/nri and internal/cri/nri ($flavor)"
set +e
(cd "$src" && nice -n 10 go test -count=1 -v "${overlay_flag[@]}" ./internal/nri/... ./internal/cri/nri/...) >"$unit_log" 2>&1
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
claim_nri_socket "$NRI_SOCKET"
del_link "$BRIDGE" # left by an interrupted run
on_exit_do del_link "$BRIDGE"
new_workdir nrirs-containerd
W=$E2E_WORK
mkdir -p "$W/cni" "$W/images" "$W/nri/plugins" "$W/nri/conf.d" "$W/opt"

busybox_rootfs "$W/images/busybox"
pause_rootfs "$W/images/pause"
oci_archive "$W/images/busybox.tar" "$BUSYBOX_IMAGE" "$W/images/busybox" /bin/sh
oci_archive "$W/images/pause.tar" "$PAUSE_IMAGE" "$W/images/pause" /pause

cat >"$W/cni/10-nrirs-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "nrirs-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$SUBNET"}]],
        "dataDir": "$W/cni-ipam"
      }
    },
    {"type": "loopback"}
  ]
}
EOF

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

daemon_log=$W/containerd.log
: >"$daemon_log"
log "starting $DAEMON ($flavor) in $W"
PATH=$bin:$PATH supervise "$daemon_log" "$bin/$DAEMON" --config "$W/config.toml"
wait_for 60 "containerd" "$bin/ctr" -a "$W/containerd.sock" version ||
    { tail -40 "$daemon_log" >&2; die "containerd did not come up"; }
wait_for 30 "the NRI socket" test -S "$NRI_SOCKET" ||
    { tail -40 "$daemon_log" >&2; die "containerd did not open the NRI socket $NRI_SOCKET"; }
check_startup_line "$daemon_log" containerd

for img in busybox pause; do
    "$bin/ctr" -a "$W/containerd.sock" -n k8s.io images import --all-platforms "$W/images/$img.tar" >/dev/null ||
        die "importing the $img test image failed"
done

tests_log=$W/tests.log
expected=$W/tests.expected
# (its TestMain connects to the daemon even to list tests)
"$bin/cri-integration.test" -test.list "$TESTS" --cri-endpoint="unix://$W/containerd.sock" \
    >"$expected" 2>"$W/tests.list.log" || { cat "$W/tests.list.log" >&2; die "listing the integration tests failed"; }
[ -s "$expected" ] || die "the integration test binary lists no test matching $TESTS"
log "running $(wc -l <"$expected") tests: $(tr '\n' ' ' <"$expected")"
set +e
(cd "$W" && PATH=$bin:$PATH timeout 900 "$bin/cri-integration.test" -test.v -test.count=1 \
    -test.run "$TESTS" -test.timeout 14m \
    --cri-endpoint="unix://$W/containerd.sock" --containerd-bin="$DAEMON") >"$tests_log" 2>&1
tests_rc=$?
set -e
[ "${E2E_VERBOSE:-0}" = 1 ] && cat "$tests_log" >&2
count_results "$tests_log" "$expected"
if [ "$tests_rc" -ne 0 ] && [ "$FAILED" = 0 ]; then
    tail -40 "$tests_log" >&2
    FAILED=1
fi
restarts=$(grep -c '^--- supervisor: daemon exited' "$daemon_log" || true)
if [ "$FAILED" != 0 ] || [ "${E2E_KEEP:-0}" = 1 ]; then
    E2E_KEEP=1
    log "logs: $tests_log $daemon_log"
fi
e2e_secs=$(($(date +%s) - te))

what="containerd $CONTAINERD_VERSION (NRI $nri_version)"
[ "$flavor" = nri-rs ] && what+=" with nri-rs $NRI_RS_VERSION" || what+=" stock"
suffix=
[ "$flavor" = stock ] && suffix=-stock
echo "$what: unit tests of internal/nri, internal/cri/nri:"
echo "containerd-unit$suffix: $unit_passed passed, $unit_failed failed, $unit_skipped skipped"
echo "$what: NRI integration tests (daemon restarted $restarts times by the supervisor):"
echo "e2e-containerd$suffix: $PASSED passed, $FAILED failed, $SKIPPED skipped"
log "times: build ${build_secs}s, unit ${unit_secs}s, e2e ${e2e_secs}s, total $(($(date +%s) - t0))s"
[ "$FAILED" = 0 ] && [ "$unit_failed" = 0 ]
