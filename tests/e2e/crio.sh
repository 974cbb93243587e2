#!/usr/bin/env bash
# CRI-O built with nri-rs, running CRI-O's own NRI end-to-end tests (test/nri).
#
#   tests/e2e/crio.sh               CRI-O with the Rust core swapped in
#   E2E_STOCK=1 tests/e2e/crio.sh   the same, stock (upstream's Go pkg/adaptation)
#
# The source is CRI-O's newest release the Go module proxy serves, v1.36.3,
# as released: it pins NRI v0.11.0, and go/adaptation builds against that
# (go/adaptation-files.sh picks the files for it). CRIO_NRI_VERSION=vX
# raises NRI first (`go get github.com/containerd/nri@vX`, then `go mod
# vendor`), as CRI-O's main branch did for v0.12.0 in a commit that changed
# only go.mod, go.sum and vendor/; stock and nri-rs builds alike. Then, as
# containerd.sh:
#   builds crio, pinns and the test/nri test binary with CRI-O's build tags
#   (nri-rs flavor: `go build -overlay` over the vendored pkg/adaptation,
#   cgo pointed at include/ and the release libnri.a); copies busybox and
#   pause images (built offline) into vfs storage with skopeo; starts CRI-O
#   with cgroupfs, Debian's runc
#   and conmon, CNI from containernetworking-plugins and NRI on
#   /var/run/nri-test.sock; runs every test of test/nri; prints
#   "e2e-crio: N passed, N failed, N skipped"; runs critest's NRI specs
#   (lib.sh; E2E_CRITEST=0: not at all) with runc behind
#   runc-oom-clamp.sh; tears everything down.
#
# Needs root, Go, cargo, gcc and the Debian packages runc, conmon, skopeo,
# containernetworking-plugins, busybox-static (see .ci/run).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

CRIO_VERSION=${CRIO_VERSION:-v1.36.3}
CRIO_NRI_VERSION=${CRIO_NRI_VERSION:-}
NRI_SOCKET=/var/run/nri-test.sock
BRIDGE=nrirs-e2e1
# The cgroups CRI-O makes with cgroupfs: the tests' pod parent, the
# containers' and conmon's (teardown removes those it left, when empty).
E2E_CGROUP_NAMES='pod_123|crio-(conmon-)?[0-9a-f]{64}|[0-9a-f]{64}'
SUBNET=10.239.48.0/24
TESTS='^Test'
# What test/nri uses: its CI image (busybox suffices: sh, sleep, grep) and
# CRI-O's default pause image.
BUSYBOX_IMAGE=quay.io/crio/fedora-crio-ci:latest
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
PKG=github.com/cri-o/cri-o
# CRI-O's Makefile derives these from the host (hack/*_tag.sh); fixed here:
# no btrfs, no gpgme (Go openpgp), no ostree, no seccomp/selinux/apparmor.
BUILDTAGS="containers_image_ostree_stub exclude_graphdriver_btrfs btrfs_noversion containers_image_openpgp"

t0=$(date +%s)
need_common
need_cmd make make # pinns
need_cmd conmon conmon
need_cmd skopeo skopeo

e2e_trap

# --- sources and builds --------------------------------------------------------
raise_nri() {
    GOFLAGS=-mod=mod go get "github.com/containerd/nri@$CRIO_NRI_VERSION"
}
if [ -n "$CRIO_NRI_VERSION" ]; then
    src=$(prepare_source "crio-nri-$CRIO_NRI_VERSION" "$PKG" "$CRIO_VERSION" raise_nri)
else
    src=$(prepare_source crio "$PKG" "$CRIO_VERSION")
fi
nri_version=$(vendored_version "$src" github.com/containerd/nri)
if [ -n "$CRIO_NRI_VERSION" ]; then
    [ "$nri_version" = "$CRIO_NRI_VERSION" ] || die "CRI-O source vendors NRI $nri_version, expected $CRIO_NRI_VERSION"
    log "CRI-O $CRIO_VERSION, NRI raised to $nri_version"
else
    log "CRI-O $CRIO_VERSION as released, NRI $nri_version"
fi

export GOFLAGS=-mod=vendor
ld="-X $PKG/internal/version.buildCommit=nri-rs-e2e"

# build_crio BIN: crio, the test/nri binary and pinns, as CRI-O's Makefile
# builds them (minus its -s -w).
build_crio() {
    local bin=$1
    cd "$src"
    nice -n 10 go build -trimpath -ldflags "$ld" -tags "$BUILDTAGS" "${OVERLAY_FLAG[@]}" -o "$bin/crio" ./cmd/crio
    nice -n 10 go test -trimpath -ldflags "$ld" -tags "test $BUILDTAGS" "${OVERLAY_FLAG[@]}" -c -o "$bin/nri.test" ./test/nri
    nice -n 10 make -s -C pinns >/dev/null
    cp bin/pinns "$bin/pinns"
}

setup_flavor "crio-$CRIO_VERSION" "$src" "$nri_version"
bin=$E2E_BUILD/bin/crio-$CRIO_VERSION-$(flavor)
build_cached "$bin" build_crio "$CRIO_VERSION $nri_version $ld $BUILDTAGS ${OVERLAY_FLAG[*]}"
if [ "$(flavor)" = nri-rs ]; then
    grep -qaF 'runtime interface created (nri-rs' "$bin/crio" ||
        die "$bin/crio does not contain go/adaptation: the overlay was not applied"
fi
build_secs=$BUILD_SECS
if [ "$E2E_CRITEST" = 1 ]; then build_critest; fi

# --- run CRI-O ------------------------------------------------------------------
te=$(date +%s)
begin_run nrirs-crio "$NRI_SOCKET" "$BRIDGE"
W=$E2E_WORK
mkdir -p "$W/crio.conf.d" "$W/hooks" "$W/log"
storage="vfs@$W/storage+$W/run"
test_images "$BUSYBOX_IMAGE" "$PAUSE_IMAGE"
printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$W/policy.json"
for img in busybox:"$BUSYBOX_IMAGE" pause:"$PAUSE_IMAGE"; do
    skopeo --policy "$W/policy.json" copy -q "oci-archive:$W/images/${img%%:*}.tar" \
        "containers-storage:[$storage]${img#*:}" >&2 ||
        die "copying the ${img%%:*} test image into CRI-O's storage failed"
done

cni_config "$BRIDGE" "$SUBNET"
crio_flags=()
runtime_path=$(command -v runc)
if [ "$E2E_CRITEST" = 1 ]; then
    start_registry
    # registry.k8s.io is mirrored by the test registry (plain HTTP); the
    # real one is never reached.
    cat >"$W/registries.conf" <<EOF
[[registry]]
prefix = "registry.k8s.io"
location = "registry.k8s.io"

[[registry.mirror]]
location = "127.0.0.1:$REGISTRY_PORT"
insecure = true
EOF
    crio_flags+=(--registries-conf "$W/registries.conf")
    # critest's pods have an infra container, which CRI-O starts with an
    # oom_score_adj of -998, more than this machine lets even root lower
    # its score (no CAP_SYS_RESOURCE); runc-oom-clamp.sh clamps it as
    # containerd's restrict_oom_score_adj does (CRI-O has no such option).
    # test/nri's pods have none.
    runtime_path=$E2E_HERE/runc-oom-clamp.sh
fi

cat >"$W/crio.conf" <<EOF
[crio]
root = "$W/storage"
runroot = "$W/run"
storage_driver = "vfs"
log_dir = "$W/log"
version_file = "$W/version"
version_file_persist = "$W/version-persist"
clean_shutdown_file = "$W/clean.shutdown"

[crio.api]
listen = "$W/crio.sock"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
selinux = false
pinns_path = "$bin/pinns"
namespaces_dir = "$W/ns"
container_exits_dir = "$W/exits"
container_attach_socket_dir = "$W/attach"
hooks_dir = ["$W/hooks"]
default_mounts_file = "$W/mounts.conf"

[crio.runtime.runtimes.runc]
runtime_path = "$runtime_path"
runtime_type = "oci"
runtime_root = "$W/runc"
monitor_path = "$(command -v conmon)"
monitor_cgroup = "pod"

[crio.image]
pause_image = "$PAUSE_IMAGE"
pause_command = "/pause"
signature_policy = "$W/policy.json"

[crio.network]
network_dir = "$W/cni"
plugin_dirs = ["/usr/lib/cni"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = true
nri_listen = "$NRI_SOCKET"
nri_plugin_dir = "$W/nri/plugins"
nri_plugin_config_dir = "$W/nri/conf.d"
EOF
: >"$W/mounts.conf"

daemon_log=$W/crio.log
start_daemon CRI-O "$daemon_log" "$NRI_SOCKET" test -S "$W/crio.sock" -- \
    "$bin/crio" --config "$W/crio.conf" --config-dir "$W/crio.conf.d" --log-level info "${crio_flags[@]}"

run_tests "$bin/nri.test" "$TESTS" \
    --crio-socket="unix://$W/crio.sock" --nri-socket="$NRI_SOCKET" --cgroup-manager=cgroupfs
e2e_secs=$(($(date +%s) - te))

# --- critest's NRI specs --------------------------------------------------------
# The same daemon, NRI configured by CRI-O's defaults; for nri-rs, once more
# with per-pod concurrency on for critest's plugins (NRI_RS_POD_CONCURRENCY,
# read by go/adaptation at New).
critest_failed=0
critest_lines=()
critest_secs=
if [ "$E2E_CRITEST" = 1 ]; then
    run_critest "crio-$(flavor)" "unix://$W/crio.sock" "$NRI_SOCKET"
    critest_lines+=("$CRITEST_LINE")
    critest_failed=$((critest_failed + CRITEST_FAILED))
    critest_secs=$CRITEST_SECS
    if [ "$(flavor)" = nri-rs ]; then
        tc=$(date +%s)
        stop_supervisor
        start_daemon "CRI-O (per-pod concurrency)" "$W/crio-podconc.log" "$NRI_SOCKET" test -S "$W/crio.sock" -- \
            env NRI_RS_POD_CONCURRENCY="$(critest_plugin_names)" \
            "$bin/crio" --config "$W/crio.conf" --config-dir "$W/crio.conf.d" --log-level info "${crio_flags[@]}"
        grep -q 'per-pod concurrency on' "$W/crio-podconc.log" ||
            die "CRI-O did not log that per-pod concurrency is on; see $W/crio-podconc.log"
        run_critest crio-nri-rs-podconc "unix://$W/crio.sock" "$NRI_SOCKET"
        critest_lines+=("$CRITEST_LINE")
        critest_failed=$((critest_failed + CRITEST_FAILED))
        critest_secs="$critest_secs+$(($(date +%s) - tc))"
    fi
fi

echo "$(label "CRI-O $CRIO_VERSION" "$nri_version"): NRI tests (test/nri):"
echo "$(result_name e2e-crio): $PASSED passed, $FAILED failed, $SKIPPED skipped"
if [ "$E2E_CRITEST" = 1 ]; then
    echo "$(label "CRI-O $CRIO_VERSION" "$nri_version"): critest $CRITEST_VERSION NRI specs, CRI-O's default NRI configuration:"
    printf '%s\n' "${critest_lines[@]}"
fi
log "times: build ${build_secs}s, e2e ${e2e_secs}s${critest_secs:+, critest ${critest_secs}s}, total $(($(date +%s) - t0))s"
[ "$FAILED" = 0 ] && [ "$critest_failed" = 0 ]
