#!/usr/bin/env bash
# CRI-O built with nri-rs, running CRI-O's own NRI end-to-end tests (test/nri).
#
#   tests/e2e/crio.sh               CRI-O with the Rust core swapped in
#   E2E_STOCK=1 tests/e2e/crio.sh   the same, stock (upstream's Go pkg/adaptation)
#   E2E_BUILD_ONLY=1 tests/e2e/crio.sh builds the daemon alone, prints "VERSION PATH"
#
# The source is CRI-O's newest release the Go module proxy serves, v1.36.3,
# as released: it pins NRI v0.11.0, and go/adaptation builds against that
# (go/adaptation-files.sh picks the files for it). CRIO_NRI_VERSION=vX
# raises NRI first (`go get github.com/containerd/nri@vX`, then `go mod
# vendor`), as CRI-O's main branch did for v0.12.0 in a commit that changed
# only go.mod, go.sum and vendor/; stock and nri-rs builds alike. Then, as
# containerd.sh:
#   builds crio with the command docs/INTEGRATION.md shows (CRI-O's
#   Makefile, GO_BUILDFLAGS naming the overlay over the vendored
#   pkg/adaptation; stock: an empty overlay) and checks that it links nri-rs
#   (stock: that it does not); builds pinns and the test/nri test binary
#   with CRI-O's build tags (nri-rs: with the overlay); copies busybox and
#   pause images (built offline) into vfs storage with skopeo; starts CRI-O
#   with cgroupfs, Debian's runc
#   and conmon, CNI from containernetworking-plugins and NRI on
#   /var/run/nri-test.sock; runs every test of test/nri; prints
#   "e2e-crio: N passed, N failed, N skipped"; runs critest's NRI specs
#   (lib.sh; E2E_CRITEST=0: not at all) with runc behind
#   runc-oom-clamp.sh; compares the counts with docs/e2e.json (E2E_RECORD=1:
#   writes them); tears everything down.
#
# Needs root, Go, cargo, gcc and the Debian packages runc, conmon, skopeo,
# containernetworking-plugins, busybox-static (see .ci/run).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

CRIO_VERSION=${CRIO_VERSION:-v1.36.3}
CRIO_NRI_VERSION=${CRIO_NRI_VERSION:-}
nondefault CRIO_VERSION v1.36.3
nondefault CRIO_NRI_VERSION ""
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
# The daemon's build, docs/INTEGRATION.md's command word for word
# (run_documented); SHRINKFLAGS= keeps the symbol table (the Makefile strips
# with -s -w) for the check that crio links nri-rs.
# shellcheck disable=SC2016 # $SRC expands when the line runs
BUILD_DAEMON='make bin/crio SHRINKFLAGS= GO_BUILDFLAGS="-overlay=$SRC/nri-rs-overlay.json"'

t0=$(date +%s)
doc_check "$BUILD_DAEMON"
figures_precheck
need_common
need_cmd make make # pinns
if ! build_only; then
    need_cmd conmon conmon
    need_cmd skopeo skopeo
fi

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

# build_crio BIN: crio (the documented command), the test/nri binary and
# pinns, as CRI-O's Makefile builds them (minus its -s -w).
build_crio() {
    local bin=$1
    cd "$SRC"
    # The runtime's make is no sub-make of nri-rs's `make e2e`.
    unset MAKEFLAGS MFLAGS MAKELEVEL
    # The Makefile's BUILDTAGS (above) and what it asks git for.
    export BUILDTAGS BUILD_COMMIT=nri-rs-e2e
    # bin/crio depends on the .go files only: one left by the other
    # flavour's build would count as up to date.
    rm -f bin/crio
    run_documented "$BUILD_DAEMON"
    mv bin/crio "$bin/crio"
    if build_only; then return; fi
    nice -n 10 go test -trimpath -ldflags "$ld" -tags "test $BUILDTAGS" "${OVERLAY_FLAG[@]}" -c -o "$bin/nri.test" ./test/nri
    nice -n 10 make -s -C pinns >/dev/null
    cp bin/pinns "$bin/pinns"
}

setup_flavor "crio-$CRIO_VERSION" "$src" "$nri_version"
bin=$(bin_dir "crio-$CRIO_VERSION")
build_cached "$bin" build_crio "$CRIO_VERSION $nri_version $BUILD_DAEMON $ld $BUILDTAGS ${OVERLAY_FLAG[*]}"
check_links_nri_rs "$bin/crio"
built_daemon "$CRIO_VERSION" "$bin/crio"
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

# start_crio LOG [VAR=VALUE...]: the daemon under the supervisor, the VARs
# in its environment.
start_crio() {
    local logf=$1
    shift
    start_daemon CRI-O "$logf" "$NRI_SOCKET" test -S "$W/crio.sock" -- \
        env "$@" "$bin/crio" --config "$W/crio.conf" --config-dir "$W/crio.conf.d" --log-level info "${crio_flags[@]}"
}

daemon_log=$W/crio.log
start_crio "$daemon_log"

run_tests "$bin/nri.test" "$TESTS" \
    --crio-socket="unix://$W/crio.sock" --nri-socket="$NRI_SOCKET" --cgroup-manager=cgroupfs
e2e_secs=$(($(date +%s) - te))

# --- critest's NRI specs --------------------------------------------------------
# The same daemon, NRI configured by CRI-O's defaults; for nri-rs once more,
# per-pod concurrency on.
run_critests crio "unix://$W/crio.sock" start_crio

echo "$(label "CRI-O $CRIO_VERSION" "$nri_version"): NRI tests (test/nri):"
echo "$(result_name e2e-crio): $PASSED passed, $FAILED failed, $SKIPPED skipped"
if [ "$E2E_CRITEST" = 1 ]; then
    echo "$(label "CRI-O $CRIO_VERSION" "$nri_version"): critest $CRITEST_VERSION NRI specs, CRI-O's default NRI configuration:"
    printf '%s\n' "${CRITEST_LINES[@]}"
fi
log "times: build ${build_secs}s, e2e ${e2e_secs}s${CRITEST_SECS:+, critest ${CRITEST_SECS}s}, total $(($(date +%s) - t0))s"
ok=0
[ "$FAILED" = 0 ] && [ "$CRITEST_FAILED" = 0 ] && ok=1
check_figures crio "$ok" "\"daemon\": \"cri-o $CRIO_VERSION\", \"nri_e2e\": $(counts_json "$PASSED" "$FAILED" "$SKIPPED")$CRITEST_JSON"
[ "$ok" = 1 ]
