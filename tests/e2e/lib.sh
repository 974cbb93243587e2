# shellcheck shell=bash
# Shared parts of the e2e runs (containerd.sh, crio.sh): prerequisites,
# fetching a runtime's source through the Go module proxy, the nri-rs
# staticlib and overlay, offline test images, a daemon supervisor, result
# counting and a teardown that leaves no process, mount, cgroup, link or
# socket behind.
#
# Nothing here is specific to one runtime. Everything a run creates lives
# under one scratch directory ($E2E_WORK, under /tmp so socket paths stay
# short), except what the tests themselves fix: the NRI socket path and
# cgroups, which teardown removes by name.

set -euo pipefail

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
E2E_HERE=$E2E_ROOT/tests/e2e
E2E_BUILD=${E2E_BUILD:-$E2E_ROOT/build/e2e}
E2E_STOCK=${E2E_STOCK:-0}
# E2E_BUILD_ONLY=1: build the daemon alone (no test binaries, no run) and
# print "VERSION PATH" of its unstripped binary (tests/size/daemons.sh).
E2E_BUILD_ONLY=${E2E_BUILD_ONLY:-0}
# What differs from the default configuration, the one docs/e2e.json's
# figures are for (nondefault; "VAR=value ...").
E2E_NONDEFAULT=
E2E_WORK=
E2E_CLEANUPS=()
E2E_CGROUPS_BEFORE=
# Names of the cgroups a runtime makes (see teardown_workdir): ids.
E2E_CGROUP_NAMES='[0-9a-f]{64}'

log() { printf 'e2e: %s\n' "$*" >&2; }

# nondefault VAR DEFAULT: notes VAR=value in E2E_NONDEFAULT when VAR is not DEFAULT.
nondefault() {
    [ "${!1}" = "$2" ] || E2E_NONDEFAULT+="${E2E_NONDEFAULT:+ }$1=${!1}"
}
die() {
    printf 'e2e: FAILED: %s\n' "$*" >&2
    exit 1
}

# --- prerequisites --------------------------------------------------------

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root: it starts a container runtime, mounts and network namespaces"
}

# need_cmd CMD DEBIAN_PACKAGE
need_cmd() {
    command -v "$1" >/dev/null 2>&1 ||
        die "'$1' not found: install the Debian package $2 (.ci/run installs it)"
}

# need_file PATH DEBIAN_PACKAGE
need_file() {
    [ -e "$1" ] || die "$1 not found: install the Debian package $2 (.ci/run installs it)"
}

need_static_libc() {
    local a
    a=$(gcc -print-file-name=libc.a 2>/dev/null || true)
    [ -f "$a" ] || die "no static libc for the pause binary: install the Debian package libc6-dev"
}

need_cgroups() {
    if [ ! -d /sys/fs/cgroup ] || [ -z "$(ls -A /sys/fs/cgroup 2>/dev/null)" ]; then
        die "no cgroup filesystem at /sys/fs/cgroup: containers cannot run here"
    fi
}

# need_common: what both runs need (root, toolchains, runc, busybox, CNI
# plugins, ip, cgroups).
need_common() {
    if build_only; then
        need_cmd go "golang (Go 1.26+)"
        need_cmd gcc gcc
        return
    fi
    need_root
    need_cmd go "golang (Go 1.26+)"
    need_cmd cargo "rust (rustup)"
    need_cmd gcc gcc
    need_static_libc
    need_cmd runc runc
    need_cmd busybox busybox-static
    local p
    for p in bridge host-local loopback; do
        need_file "/usr/lib/cni/$p" containernetworking-plugins
    done
    need_cmd ip iproute2
    need_cmd pgrep procps
    need_cmd flock util-linux
    need_cgroups
}

# The NRI socket path is fixed by the runtimes' tests. Refuse to run over a
# socket something else still listens on; remove a stale one.
claim_nri_socket() {
    local sock=$1
    if [ -S "$sock" ]; then
        if command -v ss >/dev/null 2>&1 && ss -xl 2>/dev/null | grep -qF " $sock "; then
            die "$sock is in use by another process (is a containerd or CRI-O test instance running?)"
        fi
        rm -f "$sock"
    fi
    on_exit_do rm -f "$sock"
}

# del_link NAME: remove a network link this run created (the CNI bridge).
del_link() {
    ip link show "$1" >/dev/null 2>&1 || return 0
    ip link del "$1"
}

# --- cleanup --------------------------------------------------------------

# on_exit_do CMD...: run CMD at exit, last registered first.
on_exit_do() {
    local q
    printf -v q '%q ' "$@"
    E2E_CLEANUPS+=("$q")
}

e2e_exit() {
    local rc=$? i
    # A second Ctrl-C or kill while the cleanups run would stop them
    # halfway, leaving daemons frozen, links and mounts behind: ignored.
    trap - EXIT
    trap '' INT TERM HUP
    set +e
    for ((i = ${#E2E_CLEANUPS[@]} - 1; i >= 0; i--)); do
        eval "${E2E_CLEANUPS[$i]}"
    done
    if [ "${E2E_TEARDOWN_FAILED:-0}" = 1 ] && [ "$rc" = 0 ]; then
        rc=1
    fi
    exit "$rc"
}

e2e_trap() {
    trap e2e_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# new_workdir PREFIX: the scratch directory of this run, torn down at exit.
new_workdir() {
    E2E_WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$E2E_WORK"
    E2E_CGROUPS_BEFORE=$E2E_WORK.cgroups-before
    find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort >"$E2E_CGROUPS_BEFORE" || true
    on_exit_do teardown_workdir
}

# pids_under DIR: processes whose command line or executable names DIR.
pids_under() {
    local dir=$1 p pid exe
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = "$$" ] && continue
        [ "$pid" = "${BASHPID:-$$}" ] && continue
        exe=$(readlink "$p/exe" 2>/dev/null || true)
        if [[ "$exe" == "$dir"/* ]] ||
            tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "$dir/"; then
            echo "$pid"
        fi
    done
}

mounts_under() {
    awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# force_delete_containers RUNC_ROOT...: every container a runc root still holds.
force_delete_containers() {
    local root id
    for root in "$@"; do
        [ -d "$root" ] || continue
        for id in $(runc --root "$root" list -q 2>/dev/null); do
            runc --root "$root" delete --force "$id" >/dev/null 2>&1 || true
        done
    done
}

teardown_workdir() {
    local dir=$E2E_WORK pids m roots leftover=0
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    # The daemon is gone by now (its supervisor's cleanup ran first); what
    # is left are containers, shims/monitors and their children.
    mapfile -t roots < <(find "$dir" -maxdepth 4 -type d -name 'runc*' 2>/dev/null)
    force_delete_containers "${roots[@]}"
    for _ in 1 2 3 4 5; do
        pids=$(pids_under "$dir")
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086 # one pid a word, split on purpose
        kill -KILL $pids 2>/dev/null || true
        sleep 0.5
    done
    for _ in 1 2 3; do
        for m in $(mounts_under "$dir"); do
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        done
        [ -z "$(mounts_under "$dir")" ] && break
        sleep 0.5
    done
    # Empty cgroups the runtime created during the run and left behind:
    # only those named like its own (E2E_CGROUP_NAMES: container and sandbox
    # ids, the tests' pod parent). Other software on the machine creates and
    # removes cgroups of its own meanwhile; those are left alone.
    if [ -f "$E2E_CGROUPS_BEFORE" ]; then
        find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort |
            comm -13 "$E2E_CGROUPS_BEFORE" - | grep -E "/($E2E_CGROUP_NAMES)\$" | sort -r |
            while read -r m; do rmdir "$m" 2>/dev/null || true; done
        rm -f "$E2E_CGROUPS_BEFORE"
    fi
    pids=$(pids_under "$dir")
    if [ -n "$pids" ]; then
        log "teardown: processes still running: ${pids//$'\n'/ }"
        leftover=1
    fi
    if [ -n "$(mounts_under "$dir")" ]; then
        log "teardown: mounts left: $(mounts_under "$dir" | tr '\n' ' ')"
        leftover=1
    fi
    if [ "$leftover" = 1 ]; then
        log "teardown: $dir kept (not everything could be removed)"
        E2E_TEARDOWN_FAILED=1
        return 0
    fi
    if [ "${E2E_KEEP:-0}" = 1 ]; then
        log "teardown: E2E_KEEP=1, logs kept in $dir"
        find "$dir" -mindepth 1 -maxdepth 1 ! -name '*.log' ! -name '*.toml' ! -name '*.conf' -exec rm -rf {} +
    else
        rm -rf "$dir"
    fi
}

# --- Go sources through the module proxy -----------------------------------

# prepare_source NAME MODULE VERSION [HOOK]: a writable, vendored copy of
# MODULE@VERSION under $E2E_BUILD/src/NAME-VERSION, kept between runs. The
# module zip carries no vendor/ directory; `go mod vendor` recreates the one
# the release was built with (checked against its go.sum). HOOK runs in the
# copy before vendoring (e.g. to raise a dependency).
prepare_source() {
    local name=$1 module=$2 version=$3 hook=${4:-} src tmp dir
    src=$E2E_BUILD/src/$name-$version
    if [ -f "$src/.nrirs-e2e-ready" ]; then
        echo "$src"
        return
    fi
    mkdir -p "$E2E_BUILD/src"
    log "fetching $module@$version through the Go module proxy"
    dir=$(cd "$E2E_BUILD" && GOFLAGS=-mod=mod go mod download -json "$module@$version" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
        die "could not download $module@$version from the Go module proxy"
    fi
    tmp=$src.tmp
    rm -rf "$tmp" "$src"
    cp -r "$dir" "$tmp"
    chmod -R u+w "$tmp"
    if [ -n "$hook" ]; then
        (cd "$tmp" && "$hook") >&2 || die "preparing $name $version failed"
    fi
    log "vendoring $name $version (go mod vendor)"
    (cd "$tmp" && GOFLAGS='' nice -n 10 go mod vendor) >&2 || die "go mod vendor failed for $name $version"
    touch "$tmp/.nrirs-e2e-ready"
    mv "$tmp" "$src"
    echo "$src"
}

# vendored_version SRC MODULE: the version SRC's vendor/modules.txt pins.
vendored_version() {
    awk -v m="$2" '$1 == "#" && $2 == m { print $3; exit }' "$1/vendor/modules.txt"
}

# --- nri-rs -----------------------------------------------------------------

# nri_rs_env: installs nri-rs as a runtime maintainer would (`make install`
# into a prefix of this run's build directory: release libnri.a, nri.h,
# nri.pc) and points pkg-config, and nothing else, at it: go/adaptation's
# `#cgo pkg-config: nri` finds the rest. Sets NRI_LIB_DIR (for the build
# key) and NRI_RS_VERSION. A runtime build without it links nothing of
# nri-rs (the stock build).
nri_rs_env() {
    local prefix=$E2E_BUILD/nri-rs-prefix
    log "installing nri-rs into $prefix (make install)"
    nice -n 10 make -C "$E2E_ROOT" --no-print-directory install PREFIX="$prefix" >&2 ||
        die "make install failed"
    [ -f "$prefix/lib/libnri.a" ] || die "make install put no libnri.a into $prefix/lib"
    NRI_LIB_DIR=$prefix/lib
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    NRI_RS_VERSION=$(pkg-config --modversion nri) || die "pkg-config cannot find the nri.pc just installed"
    # Only pkg-config: `make` exports flags for its own uses, which a
    # runtime's build must not see.
    unset CGO_LDFLAGS CGO_CPPFLAGS
    # Go's build cache keys a cgo package on CGO_CFLAGS but not on what
    # pkg-config answers: without the install's fingerprint here, a package
    # compiled against another prefix (another clone sharing the cache)
    # would be reused, -L path and all (docs/INTEGRATION.md, step 3).
    local id
    id=$(cat "$prefix/lib/pkgconfig/nri.pc" "$prefix/include/nri.h" "$prefix/lib/libnri.a" |
        sha256sum | cut -c1-16)
    export CGO_CFLAGS="-O2 -g -DNRI_RS_INSTALL_ID=$id"
}

stock_env() {
    unset CGO_CFLAGS CGO_LDFLAGS PKG_CONFIG_PATH
    NRI_RS_VERSION=
}

build_only() { [ "$E2E_BUILD_ONLY" = 1 ]; }

# bin_dir NAME: where the builds of NAME (name-version) for this flavour
# are cached; a build-only run has its own, holding the daemon alone.
bin_dir() {
    if build_only; then echo "$E2E_BUILD/bin/$1-$(flavor)-daemon"; else echo "$E2E_BUILD/bin/$1-$(flavor)"; fi
}

# built_daemon VERSION BIN: in a build-only run, prints "VERSION BIN" and
# ends the run.
built_daemon() {
    build_only || return 0
    echo "$1 $2"
    exit 0
}

# flavor: what this run builds and tests.
flavor() { if [ "$E2E_STOCK" = 1 ]; then echo stock; else echo nri-rs; fi; }

# setup_flavor NAME SRC NRI_VERSION: for the nri-rs flavor, the staticlib, cgo
# flags and the overlay over SRC's vendored pkg/adaptation, written to
# SRC/nri-rs-overlay.json (where docs/INTEGRATION.md's build commands
# read it), in OVERLAY_FLAG (the go flag to pass); for the stock flavor,
# no cgo flags, no OVERLAY_FLAG, and an empty overlay in that file, so
# that the documented commands build stock daemons unchanged. Sets SRC.
setup_flavor() {
    SRC=$2
    local overlay=$SRC/nri-rs-overlay.json
    OVERLAY_FLAG=()
    if [ "$(flavor)" = stock ]; then
        stock_env
        printf '{"Replace": {}}\n' >"$overlay"
        return
    fi
    nri_rs_env
    "$E2E_HERE/overlay.sh" "$SRC/vendor/github.com/containerd/nri/pkg/adaptation" "$3" "$overlay"
    # shellcheck disable=SC2034 # read by the sourcing script's builds
    OVERLAY_FLAG=(-overlay "$overlay")
}

# --- the documented builds ----------------------------------------------------
#
# docs/INTEGRATION.md ("Building it, step by step") shows the commands that
# build containerd's and CRI-O's daemons with nri-rs. The scripts run those
# very lines: each is kept in the script as text, checked to be a line of
# the document (leading spaces aside), then run with eval in the runtime's
# source directory, where it reads $SRC/nri-rs-overlay.json (setup_flavor).

E2E_DOC=$E2E_ROOT/docs/INTEGRATION.md

# doc_check LINE: dies unless docs/INTEGRATION.md shows LINE on a line of its own.
doc_check() {
    # (not grep -q: sed, cut short, would fail the pipeline)
    sed 's/^[[:space:]]*//' "$E2E_DOC" | grep -xF -- "$1" >/dev/null ||
        die "docs/INTEGRATION.md does not show the build command this script runs:
    $1
  change the script and the document together"
}

# run_documented LINE: LINE (doc_check'ed), in the current directory, at low priority.
run_documented() {
    doc_check "$1"
    log "running, as docs/INTEGRATION.md shows: $1"
    eval "nice -n 10 $1" >&2
}

# check_links_nri_rs BIN: BIN, an unstripped daemon, must link nri-rs's C
# ABI (nri_adaptation_new) when built with nri-rs, and must not when stock.
check_links_nri_rs() {
    local bin=$1 syms
    syms=$(go tool nm "$bin") ||
        die "go tool nm cannot read the symbols of $bin (a stripped binary has none: build it without -s)"
    if [ "$(flavor)" = nri-rs ]; then
        grep -qE ' nri_adaptation_new$' <<<"$syms" ||
            die "$bin does not link nri_adaptation_new: it was built without nri-rs (the overlay was not applied)"
        log "$(basename "$bin") links nri-rs (nri_adaptation_new)"
    else
        ! grep -qE ' nri_adaptation_new$' <<<"$syms" || die "the stock $bin links nri_adaptation_new"
        log "$(basename "$bin") does not link nri-rs, as a stock build should"
    fi
}

# label RUNTIME NRI_VERSION: "containerd v2.4.2 (NRI v0.12.3) with nri-rs 0.1.0" or "... stock".
label() {
    if [ "$(flavor)" = stock ]; then echo "$1 (NRI $2) stock"; else echo "$1 (NRI $2) with nri-rs $NRI_RS_VERSION"; fi
}

# result_name NAME: NAME, or NAME-stock for the stock flavor.
result_name() {
    if [ "$(flavor)" = stock ]; then echo "$1-stock"; else echo "$1"; fi
}

# build_cached BIN FUNC DESCRIPTION: runs `FUNC BIN` (in a subshell) unless
# BIN holds a build of the same inputs: FUNC's code, DESCRIPTION (version,
# flags) and, for the nri-rs flavor, every file nri-rs contributes (the
# overlay, go/adaptation with its subdirectories, nri.h, libnri.a). Sets
# BUILD_SECS.
build_cached() {
    local bin=$1 func=$2 desc=$3 key t rc
    t=$(date +%s)
    key=$(
        {
            declare -f "$func"
            printf '%s\n' "$desc" "$(flavor)"
            if [ "$(flavor)" = nri-rs ]; then
                cat "$NRI_LIB_DIR/libnri.a" "$NRI_LIB_DIR/pkgconfig/nri.pc" \
                    "$NRI_LIB_DIR/../include/nri.h" "$E2E_ROOT/go/adaptation-files.sh"
                find "$E2E_ROOT/go/adaptation" -type f -print0 | sort -z | xargs -0 cat
            fi
        } | sha256sum | cut -c1-16
    )
    if [ "$(cat "$bin/.key" 2>/dev/null)" = "$key" ]; then
        log "$(basename "$bin") is up to date in $bin"
    else
        log "building $(basename "$bin") into $bin"
        rm -rf "$bin"
        mkdir -p "$bin"
        # Not `(...) || die`: bash ignores set -e in a command whose status
        # || tests, so a failed step of FUNC would not stop it, and a build
        # whose last step passed would be cached.
        set +e
        (
            set -e
            "$func" "$bin"
        )
        rc=$?
        set -e
        [ "$rc" = 0 ] || die "building $(basename "$bin") failed"
        echo "$key" >"$bin/.key"
    fi
    # shellcheck disable=SC2034 # read by the sourcing script's summary
    BUILD_SECS=$(($(date +%s) - t))
}

# --- test images, built offline ---------------------------------------------

image_arch() {
    case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) die "unsupported architecture $(uname -m)" ;;
    esac
}

# busybox_rootfs DIR: busybox from Debian's busybox-static, one link per applet.
busybox_rootfs() {
    local d=$1 a bb
    bb=$(command -v busybox)
    mkdir -p "$d"/bin "$d"/etc "$d"/tmp "$d"/proc "$d"/sys "$d"/dev "$d"/root "$d"/var
    chmod 1777 "$d/tmp"
    cp "$bb" "$d/bin/busybox"
    for a in $("$d/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$d/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$d/etc/passwd"
    printf 'root:x:0:\nnobody:x:65534:\n' >"$d/etc/group"
}

# pause_rootfs DIR: tests/e2e/pause.c, linked statically.
pause_rootfs() {
    mkdir -p "$1"
    gcc -static -Os -o "$1/pause" "$E2E_HERE/pause.c" || die "building the pause binary failed (gcc, libc6-dev)"
    strip "$1/pause" 2>/dev/null || true
}

# oci_archive OUT NAME ROOTFS CMD...: an OCI image layout tarball holding one
# image, named NAME (io.containerd.image.name; ref.name is the tag). Its
# config names OCI_STOP_SIGNAL as the stop signal when that is set.
oci_archive() {
    local out=$1 name=$2 rootfs=$3 d arch ldig lsize cdig csize mdig msize cmd="" a stop=""
    shift 3
    for a in "$@"; do cmd+="${cmd:+,}\"$a\""; done
    [ -z "${OCI_STOP_SIGNAL:-}" ] || stop=",\"StopSignal\":\"$OCI_STOP_SIGNAL\""
    arch=$(image_arch)
    d=$(mktemp -d)
    mkdir -p "$d/blobs/sha256"
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$d/layer.tar" .
    ldig=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
    lsize=$(stat -c %s "$d/layer.tar")
    mv "$d/layer.tar" "$d/blobs/sha256/$ldig"
    printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":[%s]%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"nri-rs tests/e2e"}]}' \
        "$arch" "$cmd" "$stop" "$ldig" >"$d/config.json"
    cdig=$(sha256sum "$d/config.json" | cut -d' ' -f1)
    csize=$(stat -c %s "$d/config.json")
    mv "$d/config.json" "$d/blobs/sha256/$cdig"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
        "$cdig" "$csize" "$ldig" "$lsize" >"$d/manifest.json"
    mdig=$(sha256sum "$d/manifest.json" | cut -d' ' -f1)
    msize=$(stat -c %s "$d/manifest.json")
    mv "$d/manifest.json" "$d/blobs/sha256/$mdig"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
        "$mdig" "$msize" "$arch" "$name" "${name##*:}" >"$d/index.json"
    printf '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
    tar -C "$d" -cf "$out" oci-layout index.json blobs
    rm -rf "$d"
}

# test_images BUSYBOX_NAME PAUSE_NAME: $E2E_WORK/images/busybox.tar and pause.tar.
test_images() {
    local d=$E2E_WORK/images
    busybox_rootfs "$d/busybox"
    pause_rootfs "$d/pause"
    oci_archive "$d/busybox.tar" "$1" "$d/busybox" /bin/sh
    # SIGKILL: a stop signal that reaches the sandbox before its process
    # has set its handlers is dropped (it is its PID namespace's init), and
    # CRI-O then waits out its whole stop timeout (about 5 minutes). critest
    # stops some pods milliseconds after starting them. containerd kills
    # sandboxes anyway; for CRI-O this makes the stop immediate.
    OCI_STOP_SIGNAL=SIGKILL oci_archive "$d/pause.tar" "$2" "$d/pause" /pause
}

# cni_config BRIDGE SUBNET: $E2E_WORK/cni/10-nrirs-e2e.conflist, a bridge with
# no gateway and no masquerading (pods get addresses, no route out), its
# IPAM state in the scratch directory.
cni_config() {
    cat >"$E2E_WORK/cni/10-nrirs-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "nrirs-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$1",
      "isGateway": false,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$2"}]],
        "dataDir": "$E2E_WORK/cni-ipam"
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

# begin_run PREFIX NRI_SOCKET BRIDGE: waits for any other e2e run on this
# machine to end (they share the tests' fixed NRI socket), claims the NRI
# socket and the bridge name, makes the scratch directory ($E2E_WORK) with
# cni/, images/, nri/.
begin_run() {
    exec {E2E_LOCK_FD}>/run/nri-rs-e2e.lock
    if ! flock -n "$E2E_LOCK_FD"; then
        log "another nri-rs e2e run is in progress on this machine: waiting for it (at most 20 min)"
        flock -w 1200 "$E2E_LOCK_FD" || die "another nri-rs e2e run still holds /run/nri-rs-e2e.lock"
    fi
    claim_nri_socket "$2"
    del_link "$3" # left by an interrupted run
    on_exit_do del_link "$3"
    new_workdir "$1"
    mkdir -p "$E2E_WORK/cni" "$E2E_WORK/images" "$E2E_WORK/nri/plugins" "$E2E_WORK/nri/conf.d"
}

# --- the daemon ---------------------------------------------------------------

# supervise LOG CMD...: runs CMD, restarting it $E2E_RESTART_WAIT seconds
# after it exits, until stop_supervisor. containerd's restart tests kill the
# daemon, poll `pidof` once a second until it is gone, then wait up to 30 s
# for it to be back: a restart within a second can be missed (the test then
# fails with "wait for containerd to be killed"). containerd's CI waits 10 s
# (RESTART_WAIT_PERIOD in script/test/utils.sh), and so does this.
E2E_RESTART_WAIT=${E2E_RESTART_WAIT:-10}
supervise() {
    local logf=$1
    shift
    rm -f "$E2E_WORK/supervisor.stop"
    (
        trap '' INT
        exec {E2E_LOCK_FD}>&- # the daemons must not hold the run's lock
        while [ ! -e "$E2E_WORK/supervisor.stop" ]; do
            "$@" >>"$logf" 2>&1 &
            wait $! || true
            echo "--- supervisor: daemon exited, restarting in ${E2E_RESTART_WAIT}s ---" >>"$logf"
            sleep "$E2E_RESTART_WAIT" &
            wait $! || true
        done
    ) &
    E2E_SUPERVISOR=$!
    on_exit_do stop_supervisor
}

stop_supervisor() {
    local sup=${E2E_SUPERVISOR:-} kids k i
    [ -n "$sup" ] || return 0
    touch "$E2E_WORK/supervisor.stop"
    # Freeze the loop so it starts nothing new, then stop its children (the
    # daemon, or the sleep before a restart): TERM, and KILL after 10 s.
    kill -STOP "$sup" 2>/dev/null || true
    kids=$(pgrep -P "$sup" || true)
    for k in $kids; do kill -TERM "$k" 2>/dev/null || true; done
    for i in $(seq 1 40); do
        for k in $kids; do kill -0 "$k" 2>/dev/null && break; k=; done
        [ -z "$k" ] && break
        sleep 0.25
    done
    for k in $kids; do kill -KILL "$k" 2>/dev/null || true; done
    kill -KILL "$sup" 2>/dev/null || true
    wait "$sup" 2>/dev/null || true
    E2E_SUPERVISOR=
}

# wait_for SECONDS WHAT CMD...: until CMD succeeds. WHAT names the wait
# for the reader of the call; the caller reports a timeout.
wait_for() {
    local secs=$1 i
    shift 2
    for ((i = 0; i < secs * 4; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.25
    done
    return 1
}

# check_startup_line LOG NAME: the swapped daemon must say it runs nri-rs,
# the stock one must not.
check_startup_line() {
    local logf=$1 name=$2 line
    line=$(grep -m1 -o 'runtime interface created (nri-rs [^)]*)' "$logf" || true)
    if [ "$E2E_STOCK" = 1 ]; then
        [ -z "$line" ] || die "the stock $name logged '$line'"
        log "$name runs upstream's pkg/adaptation (no nri-rs start-up line)"
    else
        [ -n "$line" ] || die "the $name built with nri-rs did not log 'runtime interface created (nri-rs ...)'; see $logf"
        case "$line" in *"nri-rs $NRI_RS_VERSION,"*) ;; *) die "$name logged '$line', expected nri-rs $NRI_RS_VERSION" ;; esac
        log "$name says: $line"
    fi
}

# start_daemon NAME LOG NRI_SOCKET READY_CMD -- CMD...: CMD under the
# supervisor; waits until READY_CMD succeeds and the NRI socket exists,
# then checks the start-up line.
start_daemon() {
    local name=$1 logf=$2 sock=$3 ready=()
    shift 3
    while [ "$1" != -- ]; do
        ready+=("$1")
        shift
    done
    shift
    : >"$logf"
    log "starting $name ($(flavor)) in $E2E_WORK"
    supervise "$logf" "$@"
    wait_for 60 "$name" "${ready[@]}" ||
        { tail -40 "$logf" >&2; die "$name did not come up"; }
    wait_for 30 "the NRI socket" test -S "$sock" ||
        { tail -40 "$logf" >&2; die "$name did not open the NRI socket $sock"; }
    check_startup_line "$logf" "$name"
}

# --- results -------------------------------------------------------------------

# count_results LOG EXPECTED: counts top-level tests of a `-test.v` log.
# A test of EXPECTED (one name a line) that never reported counts as failed.
# Sets PASSED FAILED SKIPPED and prints failures and skip reasons.
count_results() {
    local logf=$1 expected=$2 t
    PASSED=$(grep -cE '^--- PASS: ' "$logf" || true)
    FAILED=$(grep -cE '^--- FAIL: ' "$logf" || true)
    # shellcheck disable=SC2034 # read by the sourcing script's summary
    SKIPPED=$(grep -cE '^--- SKIP: ' "$logf" || true)
    while read -r t; do
        [ -n "$t" ] || continue
        if ! grep -qE "^--- (PASS|FAIL|SKIP): $t " "$logf"; then
            log "$t did not report a result"
            FAILED=$((FAILED + 1))
        fi
    done <"$expected"
    grep -E '^--- FAIL: ' "$logf" | sed 's/^/e2e:   /' >&2 || true
    # go test -v prints a test's log (the skip reason last) before its result.
    grep -B1 -E '^--- SKIP: ' "$logf" | grep -vE '^--$' | sed 's/^ */e2e:   /' >&2 || true
}

# run_tests BIN REGEXP ARGS...: lists, then runs, the tests of the Go test
# binary BIN matching REGEXP (ARGS go to both), in $E2E_WORK, with a 15
# minute limit; counts them (count_results). A failed test named in
# E2E_RETRY_ONCE (a known-racy upstream test, see the caller) runs once more
# on its own; passing then, it counts as passed and the retry is reported
# (RETRIED). Keeps the scratch directory's logs when a test failed.
run_tests() {
    local bin=$1 re=$2 rc t
    shift 2
    local logf=$E2E_WORK/tests.log expected=$E2E_WORK/tests.expected
    RETRIED=
    # A TestMain may print too (moby's says which daemon it tests): only
    # the lines that are test names count.
    "$bin" -test.list "$re" "$@" >"$expected.out" 2>"$E2E_WORK/tests.list.log" ||
        { cat "$E2E_WORK/tests.list.log" >&2; die "listing the tests of $(basename "$bin") failed"; }
    grep -E '^Test[^[:space:]]*$' "$expected.out" >"$expected" || true
    [ -s "$expected" ] || die "$(basename "$bin") has no test matching $re"
    log "running $(wc -l <"$expected") tests: $(tr '\n' ' ' <"$expected")"
    rc=0
    go_test_binary "$bin" "$re" "$logf" "$@" || rc=$?
    count_results "$logf" "$expected"
    if [ "$rc" -ne 0 ] && [ "$FAILED" = 0 ]; then
        tail -40 "$logf" >&2
        FAILED=1
    fi
    for t in ${E2E_RETRY_ONCE:-}; do
        grep -qE "^--- FAIL: $t " "$logf" || continue
        log "$t failed; it is a known-racy upstream test: running it once more"
        if go_test_binary "$bin" "^$t\$" "$E2E_WORK/tests.retry-$t.log" "$@" &&
            grep -qE "^--- PASS: $t " "$E2E_WORK/tests.retry-$t.log"; then
            FAILED=$((FAILED - 1))
            PASSED=$((PASSED + 1))
            RETRIED+="${RETRIED:+, }$t"
            log "$t passed on its retry"
        fi
    done
    if [ "$FAILED" != 0 ] || [ -n "$RETRIED" ]; then
        E2E_KEEP=1
    fi
    if [ "${E2E_KEEP:-0}" = 1 ]; then
        log "logs: $E2E_WORK"
    fi
}

# go_test_binary BIN REGEXP LOG ARGS...: one run of a Go test binary, its
# exit status returned. In the background, so that a signal to this script
# runs its exit trap (teardown) at once rather than after the tests.
go_test_binary() {
    local bin=$1 re=$2 logf=$3 rc
    shift 3
    set +e
    (cd "$E2E_WORK" && exec timeout 900 "$bin" -test.v -test.count=1 -test.run "$re" -test.timeout 14m "$@") \
        >"$logf" 2>&1 &
    wait $!
    rc=$?
    set -e
    [ "${E2E_VERBOSE:-0}" = 1 ] && cat "$logf" >&2
    return "$rc"
}

# --- critest (cri-tools' NRI conformance specs) ----------------------------------
#
# critest's NRI specs ("[k8s.io] NRI", pkg/validate/nri_linux.go of
# sigs.k8s.io/cri-tools) run against the daemon the script started, with
# its NRI configuration left at the runtime's defaults. critest fetches its
# test image with CRI PullImage; a registry of our own
# (tests/e2e/registry, standard library only) serves the busybox image
# built offline, and the runtime is told to use it as the mirror of
# registry.k8s.io. E2E_CRITEST=0 leaves critest out.

E2E_CRITEST=${E2E_CRITEST:-1}
CRITEST_VERSION=${CRITEST_VERSION:-v1.37.0}
CRITEST_IMAGE=registry.k8s.io/e2e-test-images/busybox:1.29-2
CRITEST_FOCUS='\[k8s\.io\] NRI '
nondefault E2E_CRITEST 1
nondefault CRITEST_VERSION v1.37.0

# build_critest: critest (a `go test -c` binary, built in module mode from
# the module proxy's copy) and the registry, into $E2E_BUILD/bin/critest-V,
# unless already there for the same inputs. Sets CRITEST_BIN.
build_critest() {
    local dir key t
    t=$(date +%s)
    CRITEST_BIN=$E2E_BUILD/bin/critest-$CRITEST_VERSION
    key=$( (
        echo "$CRITEST_VERSION"
        go version
        cat "$E2E_HERE/registry/main.go"
    ) | sha256sum | cut -c1-16)
    if [ "$(cat "$CRITEST_BIN/.key" 2>/dev/null)" = "$key" ]; then
        log "critest $CRITEST_VERSION and the registry are up to date in $CRITEST_BIN"
        return
    fi
    log "building critest $CRITEST_VERSION and the registry into $CRITEST_BIN"
    dir=$(cd "$E2E_BUILD" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/cri-tools@$CRITEST_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
        die "could not download sigs.k8s.io/cri-tools@$CRITEST_VERSION from the Go module proxy"
    fi
    rm -rf "$CRITEST_BIN"
    mkdir -p "$CRITEST_BIN"
    (cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 10 go test -c -o "$CRITEST_BIN/critest" ./cmd/critest) >&2 ||
        die "building critest failed"
    (cd "$E2E_HERE/registry" && GOFLAGS="" CGO_ENABLED=0 go build -o "$CRITEST_BIN/registry" main.go) >&2 ||
        die "building tests/e2e/registry failed"
    echo "$key" >"$CRITEST_BIN/.key"
    log "critest built in $(($(date +%s) - t))s"
}

# start_registry: critest's image, packed from the busybox rootfs
# test_images made, served over HTTP on a free port of 127.0.0.1 (in
# REGISTRY_PORT) until the end of the run.
start_registry() {
    local d=$E2E_WORK/registry
    mkdir -p "$d/busybox"
    oci_archive "$d/busybox.tar" "$CRITEST_IMAGE" "$E2E_WORK/images/busybox" /bin/sh
    tar -C "$d/busybox" -xf "$d/busybox.tar"
    rm -f "$d/busybox.tar"
    "$CRITEST_BIN/registry" -port-file "$d/port" "$d/busybox" >"$E2E_WORK/registry.log" 2>&1 &
    E2E_REGISTRY=$!
    on_exit_do stop_registry
    wait_for 20 "the registry" test -s "$d/port" ||
        { cat "$E2E_WORK/registry.log" >&2; die "the test registry did not start"; }
    REGISTRY_PORT=$(cat "$d/port")
    log "test registry on 127.0.0.1:$REGISTRY_PORT serves $CRITEST_IMAGE"
}

stop_registry() {
    [ -n "${E2E_REGISTRY:-}" ] || return 0
    kill "$E2E_REGISTRY" 2>/dev/null || true
    wait "$E2E_REGISTRY" 2>/dev/null || true
    E2E_REGISTRY=
}

# critest_plugin_names: the names critest's NRI plugins register with, as
# its source spells them; the per-pod concurrency run opts them all in.
critest_plugin_names() {
    local dir
    dir=$(cd "$E2E_BUILD" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/cri-tools@$CRITEST_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    grep -ohE '"cri-test-nri-[a-z0-9-]+"' "$dir/pkg/validate/"nri*.go | tr -d '"' | sort -u | paste -sd, -
}

# run_critest NAME ENDPOINT NRI_SOCKET: critest's NRI specs, serially, with
# a 10 minute limit. Logs the skip reasons and failures; sets CRITEST_LINE
# ("critest-NAME: N passed, N failed, N skipped"), CRITEST_FAILED and
# CRITEST_SECS.
run_critest() {
    local name=$1 endpoint=$2 sock=$3 logf total passed failed skipped rc t
    t=$(date +%s)
    logf=$E2E_WORK/critest-$name.log
    total=$("$CRITEST_BIN/critest" --ginkgo.dry-run --ginkgo.no-color --nri-socket="$sock" \
        --ginkgo.focus="$CRITEST_FOCUS" 2>/dev/null | sed -n 's/^Ran \([0-9]*\) of .*/\1/p')
    if [ -z "$total" ] || [ "$total" = 0 ]; then
        die "critest $CRITEST_VERSION lists no NRI spec"
    fi
    log "critest $CRITEST_VERSION: $total NRI specs against $endpoint ($name)"
    rc=0
    (cd "$E2E_WORK" && exec timeout 600 "$CRITEST_BIN/critest" --runtime-endpoint="$endpoint" \
        --image-endpoint="$endpoint" --nri-socket="$sock" --ginkgo.focus="$CRITEST_FOCUS" \
        --ginkgo.no-color --ginkgo.v --ginkgo.timeout=9m) >"$logf" 2>&1 &
    wait $! || rc=$?
    passed=$(sed -n 's/.* \([0-9]*\) Passed | .*/\1/p' "$logf" | tail -1)
    failed=$(sed -n 's/.* | \([0-9]*\) Failed | .*/\1/p' "$logf" | tail -1)
    if [ -z "$passed" ] || [ -z "$failed" ]; then
        tail -40 "$logf" >&2
        passed=${passed:-0}
        failed=$((total - passed))
    fi
    skipped=$((total - passed - failed))
    if [ "$rc" -ne 0 ] && [ "$failed" = 0 ]; then
        tail -40 "$logf" >&2
        failed=1
    fi
    # Ginkgo repeats a skip's reason as "[SKIPPED] <reason>" (shortened
    # here: containerd's names every container it lost); failures are named
    # in the summary.
    grep -E '^\s*\[SKIPPED\] ' "$logf" | grep -vE '\[SKIPPED\] in \[' |
        sed -E 's/^ *\[SKIPPED\] //; s/ \(\[[0-9a-f ]+\]\)//' | cut -c1-200 | sort | uniq -c |
        sed -E 's/^ *([0-9]+) /e2e:   skipped (\1): /' >&2 || true
    grep -E '^\s*\[FAIL\] ' "$logf" | sed 's/^ */e2e:   /' >&2 || true
    CRITEST_LINE="critest-$name: $passed passed, $failed failed, $skipped skipped"
    log "$CRITEST_LINE"
    CRITEST_COUNTS=$(counts_json "$passed" "$failed" "$skipped")
    CRITEST_FAILED=$failed
    CRITEST_SECS=$(($(date +%s) - t))
    [ "$failed" = 0 ] || E2E_KEEP=1
}

# run_critests NAME ENDPOINT START: critest's NRI specs against the daemon
# the script started (run_critest NAME-<flavour>); for nri-rs once more,
# after stopping it and having `START LOG NRI_RS_POD_CONCURRENCY=<names>`
# start it again with per-pod concurrency on for critest's plugins
# (go/adaptation reads the variable at New). E2E_CRITEST=0: nothing. Sets
# CRITEST_LINES (the summary lines), CRITEST_FAILED (specs failed in all),
# CRITEST_SECS ("N" or "N+N") and CRITEST_JSON (the e2e.json members
# "critest" and "critest_podconc", each after a ", ").
run_critests() {
    local name=$1 endpoint=$2 start=$3 logf failed secs tc
    CRITEST_LINES=()
    CRITEST_JSON=
    CRITEST_FAILED=0
    CRITEST_SECS=
    [ "$E2E_CRITEST" = 1 ] || return 0
    run_critest "$name-$(flavor)" "$endpoint" "$NRI_SOCKET"
    CRITEST_LINES+=("$CRITEST_LINE")
    CRITEST_JSON+=", \"critest\": $CRITEST_COUNTS"
    failed=$CRITEST_FAILED
    secs=$CRITEST_SECS
    if [ "$(flavor)" = nri-rs ]; then
        tc=$(date +%s)
        stop_supervisor
        logf=$E2E_WORK/$name-podconc.log
        log "restarting $name with per-pod concurrency on for critest's plugins"
        "$start" "$logf" NRI_RS_POD_CONCURRENCY="$(critest_plugin_names)"
        grep -q 'per-pod concurrency on' "$logf" ||
            die "$name did not log that per-pod concurrency is on; see $logf"
        run_critest "$name-nri-rs-podconc" "$endpoint" "$NRI_SOCKET"
        CRITEST_LINES+=("$CRITEST_LINE")
        CRITEST_JSON+=", \"critest_podconc\": $CRITEST_COUNTS"
        failed=$((failed + CRITEST_FAILED))
        secs="$secs+$(($(date +%s) - tc))"
    fi
    CRITEST_FAILED=$failed
    CRITEST_SECS=$secs
}

# --- the figures in docs/e2e.json -------------------------------------------------
#
# docs/e2e.json holds, for each runtime, the counts a passing `make e2e`
# (nri-rs, default configuration) gets: one line a runtime, written by
# these scripts alone. A run compares its counts with its runtime's line;
# E2E_RECORD=1 writes them there instead. Stock runs and runs of another
# configuration (E2E_NONDEFAULT) neither compare nor write.

E2E_RESULTS=$E2E_ROOT/docs/e2e.json
E2E_RECORD=${E2E_RECORD:-0}

# counts_json PASSED FAILED SKIPPED
counts_json() {
    printf '{"passed": %d, "failed": %d, "skipped": %d}' "$1" "$2" "$3"
}

# figures_precheck: dies early on an E2E_RECORD=1 that could not record.
figures_precheck() {
    [ "$E2E_RECORD" = 1 ] || return 0
    [ "$(flavor)" = nri-rs ] ||
        die "E2E_RECORD=1 records nri-rs's figures; E2E_STOCK=1 runs stock daemons"
    [ -z "$E2E_NONDEFAULT" ] ||
        die "E2E_RECORD=1 records the default configuration only; unset $E2E_NONDEFAULT"
}

# check_figures RUNTIME OK MEMBERS: compares MEMBERS (the JSON object's
# members, "daemon" first) with RUNTIME's line of docs/e2e.json, or writes
# them there (E2E_RECORD=1), for a run that passed (OK=1).
check_figures() {
    local rt=$1 ok=$2 obj="{$3}" recorded r line lines=()
    if [ "$(flavor)" = stock ]; then
        log "stock daemon: docs/e2e.json (nri-rs's figures) neither compared nor written"
        return 0
    fi
    if [ -n "$E2E_NONDEFAULT" ]; then
        log "not the default configuration ($E2E_NONDEFAULT): docs/e2e.json neither compared nor written"
        return 0
    fi
    if [ "$ok" != 1 ]; then
        log "the run failed: docs/e2e.json neither compared nor written"
        return 0
    fi
    recorded=$(grep -E "^  \"$rt\": " "$E2E_RESULTS" 2>/dev/null | sed -E 's/^  "[^"]*": //; s/,$//' || true)
    if [ "$E2E_RECORD" = 1 ]; then
        for r in containerd crio; do
            if [ "$r" = "$rt" ]; then
                lines+=("  \"$r\": $obj")
            else
                line=$(grep -E "^  \"$r\": " "$E2E_RESULTS" 2>/dev/null | sed 's/,$//' || true)
                [ -z "$line" ] || lines+=("$line")
            fi
        done
        # Rewritten in place: the file keeps its owner.
        {
            echo '{'
            for r in "${!lines[@]}"; do
                if [ "$r" -lt $((${#lines[@]} - 1)) ]; then echo "${lines[$r]},"; else echo "${lines[$r]}"; fi
            done
            echo '}'
        } >"$E2E_RESULTS"
        log "E2E_RECORD=1: wrote $rt's figures to docs/e2e.json"
    elif [ "$recorded" = "$obj" ]; then
        log "the figures match docs/e2e.json"
    else
        die "the figures differ from docs/e2e.json's
  recorded: ${recorded:-(none)}
  this run: $obj
  if the change is meant (another release, test list or machine), record the
  figures with \`E2E_RECORD=1 make e2e-$rt\` and commit docs/e2e.json"
    fi
}
