#!/usr/bin/env bash
# Runs upstream NRI's own pkg/adaptation test suite, of each release named
# (default: every release in lib.sh's conformance_versions), against
# nri-rs's Go drop-in (go/adaptation, backed by the Rust core), unmodified
# apart from the import path of pkg/adaptation.
#
#   run.sh [VERSION...]
#
# Each release runs in a scratch module of its own that requires that
# release of github.com/containerd/nri (for pkg/api, pkg/stub and the rest)
# and holds a copy of go/adaptation under its own import path, so the
# package is built against that release as a runtime pinning it would
# build it. The test files come from the Go module cache and live only in
# the scratch module; nothing from upstream is committed. Up to v0.12.2 the
# suite is written with ginkgo, from v0.12.3 on with plain `go test`.
#
# known-differences.txt lists, per release, the test files left out and the
# tests expected to fail, each with its reason; known.py judges each run
# against it. One report line per release:
#   upstream NRI vX pkg/adaptation suite on nri-rs: N passed, M failed, K skipped (known differences: ...)
# and the run fails when a test fails that is not listed, when a listed one
# does not fail, when a release's suite does not build, or when the core
# panicked (caught, but printed) anywhere in it.
#
# Needs pkg-config to find nri.pc and libnri.a (the Makefile points
# PKG_CONFIG_PATH at what `make build` writes). Releases run one after the
# other, all with -race and GOEXPERIMENT=cgocheck2, sharing the Go build
# cache.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
list="$conformance_dir/known-differences.txt"
# The scratch module takes go/'s module path, so that go/adaptation keeps
# its import path and the upstream files need only that one rewrite.
our_module=github.com/nri-rs/nri-rs/go

# NRI_CONFORMANCE_KEEP=1 keeps the scratch modules (and their logs) and
# says where.
work=$(mktemp -d)
if [ "${NRI_CONFORMANCE_KEEP:-0}" = 1 ]; then
    echo "conformance: scratch modules in $work" >&2
else
    trap 'rm -rf "$work"' EXIT
fi

# The modules upstream's ginkgo suites need and the library does not:
# go/tests pins them (go/tests/conformance/deps_test.go).
test_deps=$(cd "$repo_root/go/tests" && GOWORK=off go list -m -f '{{.Path}}@{{.Version}}' \
    github.com/onsi/ginkgo/v2 github.com/onsi/gomega github.com/google/go-cmp)

# run_one VERSION: builds and runs that release's suite; prints its report
# line (and any disagreement with the list); fails on a disagreement.
run_one() {
    local version=$1 upstream mod f base rc kind
    upstream=$(upstream_dir "$version") || return 1
    [ -d "$upstream/pkg/adaptation" ] || { echo "$nri_module@$version has no pkg/adaptation" >&2; return 1; }
    mod="$work/$version"
    copy_adaptation "$version" "$mod/adaptation"
    # Our test-only options, which upstream's suite calls (WithTestNRIVersion).
    cp "$repo_root/go/adaptation/helpers_test.go" "$mod/adaptation/"

    local -a left_out=() taken=()
    local out
    out=$(python3 "$conformance_dir/known.py" "$list" files "$version") || return 1
    [ -z "$out" ] || mapfile -t left_out <<<"$out"
    for f in "$upstream"/pkg/adaptation/*_test.go; do
        base=$(basename "$f")
        if [ "${#left_out[@]}" -gt 0 ] && printf '%s\n' "${left_out[@]}" | grep -qxF "$base"; then continue; fi
        sed 's#"github.com/containerd/nri/pkg/adaptation"#"'"$our_module"'/adaptation"#' \
            "$f" >"$mod/adaptation/zz_upstream_$base"
        taken+=("$base")
    done
    [ "${#taken[@]}" -gt 0 ] || { echo "upstream NRI $version: every test file is left out" >&2; return 1; }
    # A file the list leaves out that this release does not have is a
    # stale entry.
    for f in "${left_out[@]}"; do
        [ -e "$upstream/pkg/adaptation/$f" ] ||
            { echo "known-differences.txt leaves out $f for $version, which upstream's $version does not have" >&2; return 1; }
    done

    (
        cd "$mod"
        cat >go.mod <<MOD
module $our_module

go 1.24.0

require $nri_module $version
MOD
        for m in $test_deps; do go mod edit -require="$m"; done
        # Checksums known already, so that tidy need not ask for them.
        cat "$repo_root/go/go.sum" "$repo_root/go/tests/go.sum" "$upstream/go.sum" 2>/dev/null | sort -u >go.sum
        GOWORK=off GOFLAGS=-mod=mod go mod tidy >tidy.log 2>&1 || { cat tidy.log >&2; exit 1; }
        got=$(pinned_version)
        [ "$got" = "$version" ] || {
            echo "upstream NRI $version: go mod tidy moved $nri_module to $got; the suite would not test $version" >&2
            exit 1
        }
    ) || return 1

    kind=gotest
    grep -qs 'RunSpecs(' "$mod"/adaptation/zz_upstream_*_test.go && kind=ginkgo
    local -a args=(-count=1 -race -timeout=5m)
    if [ "$kind" = ginkgo ]; then
        args+=(-v ./adaptation -args -ginkgo.no-color "-ginkgo.json-report=$mod/report.json")
    else
        args+=(-json ./adaptation)
    fi
    set +e
    (cd "$mod" && GOWORK=off GOFLAGS=-mod=mod GOEXPERIMENT=cgocheck2 go test "${args[@]}") >"$mod/test.log" 2>&1
    rc=$?
    set -e
    local report="$mod/test.log"
    if [ "$kind" = ginkgo ]; then
        report="$mod/report.json"
        if [ ! -s "$report" ]; then
            tail -40 "$mod/test.log"
            echo "upstream NRI $version pkg/adaptation suite on nri-rs: did not run (no ginkgo report)"
            return 1
        fi
    fi
    # The core catches its panics at the C ABI, and Rust's hook prints each
    # to the daemon's stderr: any is a bug, whatever the tests say.
    if grep -q "^thread '.*' panicked at" "$mod/test.log"; then
        grep -A1 "^thread '.*' panicked at" "$mod/test.log" | head -6
        echo "upstream NRI $version pkg/adaptation suite on nri-rs: the core panicked"
        return 1
    fi
    if ! python3 "$conformance_dir/known.py" "$list" judge "$version" "$kind" "$report" "$mod/test.log" "$rc" "${left_out[@]}"; then
        # ginkgo's report has no output of the test binary; its log does.
        [ "$kind" = gotest ] || { echo "  the end of go test's output:"; tail -30 "$mod/test.log" | sed 's/^/      /'; }
        return 1
    fi
}

if [ $# -eq 0 ]; then
    read -ra versions <<<"$conformance_versions"
    set -- "${versions[@]}"
fi
# The report lines also go to build/conformance/report.txt, and their
# counts to build/conformance/summary.json; the docs quote the counts from
# docs/conformance.json (tests/lint/figures.py checks the quotes), so a run
# whose counts differ from that file's fails until it is updated.
# NRI_CONFORMANCE_RECORD=1 writes this run's counts into it instead (only
# when every suite agreed with known-differences.txt).
out_dir="$repo_root/build/conformance"
mkdir -p "$out_dir"
: >"$out_dir/report.txt"
failed=()
for version in "$@"; do
    run_one "$version" | tee -a "$out_dir/report.txt" || failed+=("$version")
done
counts_ok=1
python3 - "$out_dir/report.txt" "$out_dir/summary.json" "$repo_root/docs/conformance.json" \
    "${NRI_CONFORMANCE_RECORD:-0}" "${#failed[@]}" <<'PY' || counts_ok=0
import json, os, re, sys

report, summary, committed_path, record, failures = sys.argv[1:6]
line = re.compile(r"^upstream NRI (v\S+) pkg/adaptation suite on nri-rs: "
                  r"(\d+) passed, (\d+) failed, (\d+) skipped")
got = {}
for text in open(report, encoding="utf-8"):
    m = line.match(text)
    if m:
        got[m[1]] = {"passed": int(m[2]), "failed": int(m[3]), "skipped": int(m[4])}
with open(summary, "w", encoding="utf-8") as f:
    json.dump({"upstream_suite": got}, f, indent=2)
    f.write("\n")

committed = {"upstream_suite": {}}
if os.path.exists(committed_path):
    with open(committed_path, encoding="utf-8") as f:
        committed = json.load(f)
suites = committed.setdefault("upstream_suite", {})
if record == "1":
    if failures != "0":
        print("conformance: not recording counts of a run that failed", file=sys.stderr)
        sys.exit(1)
    suites.update(got)
    committed["upstream_suite"] = dict(sorted(suites.items(), key=lambda kv: [int(x) for x in kv[0][1:].split(".")]))
    with open(committed_path, "w", encoding="utf-8") as f:
        json.dump(committed, f, indent=2)
        f.write("\n")
    print(f"conformance: recorded the counts of {', '.join(got)} in docs/conformance.json")
    sys.exit(0)
differ = [v for v in got if suites.get(v) != got[v]]
for v in differ:
    was = suites.get(v)
    said = f"{was['passed']} passed, {was['failed']} failed, {was['skipped']} skipped" if was else "nothing"
    now = got[v]
    print(f"conformance: {v}: {now['passed']} passed, {now['failed']} failed, {now['skipped']} skipped; "
          f"docs/conformance.json says {said}", file=sys.stderr)
if differ:
    print("conformance: the counts differ from docs/conformance.json, which the docs quote. If this run is "
          "right, record it with `NRI_CONFORMANCE_RECORD=1 make conformance` and correct the quotes "
          "`make lint-docs` then points at", file=sys.stderr)
    sys.exit(1)
PY
if [ "${#failed[@]}" -gt 0 ]; then
    echo "conformance: upstream's suite disagrees with known-differences.txt for ${failed[*]}" >&2
    exit 1
fi
[ "$counts_ok" = 1 ] || exit 1
