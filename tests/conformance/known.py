#!/usr/bin/env python3
"""Reads tests/conformance/known-differences.txt and judges one run of an
upstream pkg/adaptation suite against it (run.sh calls this).

  known.py LIST files VERSION
      the upstream test files to leave out for VERSION, one a line
  known.py LIST judge VERSION ginkgo|gotest REPORT LOG RC [FILES_LEFT_OUT...]
      REPORT is ginkgo's --json-report or `go test -json` output, LOG what
      `go test` printed, RC its exit status. Prints the report line and
      every way the run disagrees with the list; exits 1 on any
      disagreement: a failure not listed, a listed failure that passed, was
      skipped or is not in the suite, a data race not listed, or `go test`
      failing with no test failed.

A line of the list is `VERSIONS | KIND | NAME | WHY | OURS`. VERSIONS is a
comma-separated list of `vX.Y.Z`, `vA-vB` (both included) or `vX+` (that
release and every later one). KIND is `file` (one of upstream's test files,
left out: it cannot compile against go/adaptation, or tests upstream's
internals), `fails` (a test, or ginkgo spec, that runs and must fail) or
`race` (a data race within upstream's test code, which fails a test or the
run only through the race detector). NAME is the file, the full test name,
or the race's two accesses by their innermost functions, `(*T).f /
(*T).g.func2`. WHY says why in one line; OURS names the test of ours that
shows what nri-rs does instead.
"""
import json
import re
import sys


def vkey(v):
    return tuple(int(x) for x in v.lstrip("v").split("."))


def applies(spec, version):
    for part in spec.split(","):
        part = part.strip()
        if part.endswith("+"):
            if vkey(version) >= vkey(part[:-1]):
                return True
        elif "-" in part:
            lo, hi = part.split("-", 1)
            if vkey(lo) <= vkey(version) <= vkey(hi):
                return True
        elif part == version:
            return True
    return False


def read_list(path, version):
    files, fails, races = [], [], []
    for no, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.rstrip("\n").split("|")]
        if len(parts) != 5 or parts[1] not in ("file", "fails", "race") or not all(parts):
            sys.exit(f"{path}:{no}: want 'VERSIONS | file|fails|race | NAME | WHY | OURS'")
        try:
            hit = applies(parts[0], version)
        except ValueError:
            sys.exit(f"{path}:{no}: bad version list {parts[0]!r}")
        if hit:
            {"file": files, "fails": fails, "race": races}[parts[1]].append(race_key(parts[2]) if parts[1] == "race" else parts[2])
    return files, fails, races


def race_key(text):
    return " / ".join(sorted(x.strip() for x in text.split("/ ")))


def frame(line):
    """`pkg/path.(*T).m.func2()` -> `(*T).m.func2`."""
    name = line.strip().rsplit("/", 1)[-1]
    name = name.split(".", 1)[1] if "." in name else name
    return name[:-2] if name.endswith("()") else name


def races_in(text):
    """The race detector's reports in text, each as the key of its two
    accesses: the innermost function of each, sorted, joined by ' / '."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if "WARNING: DATA RACE" not in line:
            continue
        tops = []
        for j in range(i + 1, min(i + 400, len(lines))):
            if lines[j].startswith("=================="):
                break
            if re.match(r"^(Previous )?(read|write|Read|Write) at ", lines[j]) and j + 1 < len(lines):
                tops.append(frame(lines[j + 1]))
        found.append(" / ".join(sorted(tops)))
    return found


def from_ginkgo(path):
    """{spec name: state}, {spec name: failure text} from a ginkgo JSON report.
    A spec's name is its containers' texts and its own, joined by spaces;
    where several specs share one (table entries), the second and later, in
    the order of their lines in the file, get " #2", " #3" and so on."""
    specs = []
    for suite in json.load(open(path, encoding="utf-8")):
        for spec in suite.get("SpecReports") or []:
            kind = spec.get("LeafNodeType", "")
            if kind == "It":
                name = " ".join((spec.get("ContainerHierarchyTexts") or []) + [spec.get("LeafNodeText", "")])
            elif spec.get("State") in ("passed", "skipped", "pending"):
                continue  # BeforeSuite and the like count only when they fail
            else:
                name = f"[{kind}]"
            loc = spec.get("LeafNodeLocation") or {}
            specs.append((name, loc.get("FileName", ""), loc.get("LineNumber", 0), spec))
    states, why, seen = {}, {}, {}
    for name, _, _, spec in sorted(specs, key=lambda s: s[:3]):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name} #{seen[name]}"
        state = spec.get("State", "")
        states[name] = {"passed": "pass", "skipped": "skip", "pending": "skip"}.get(state, "fail")
        failure = spec.get("Failure") or {}
        if failure:
            loc = failure.get("Location") or {}
            why[name] = f"{loc.get('FileName', '?')}:{loc.get('LineNumber', '?')}: {failure.get('Message', '')}"
    return states, why


def from_gotest(path):
    """{leaf test name: state}, {name: output} from `go test -json` output.
    A test with subtests counts through its subtests, unless it failed with
    none of them failing (a failure of its own)."""
    final, output, started, other = {}, {}, [], []
    pkg_failed = False
    for line in open(path, encoding="utf-8", errors="replace"):
        try:
            ev = json.loads(line)
        except ValueError:
            other.append(line)
            continue
        test, action = ev.get("Test"), ev.get("Action")
        if not test:
            if action == "fail":
                pkg_failed = True
            if action in ("output", "build-output"):
                other.append(ev.get("Output", ""))
            continue
        if action == "run":
            started.append(test)
        elif action == "output":
            output.setdefault(test, []).append(ev.get("Output", ""))
        elif action in ("pass", "fail", "skip"):
            final[test] = action
    for test in started:
        final.setdefault(test, "fail")  # never finished: the binary died in it
        if test not in output:
            output[test] = []
    states = {}
    for test, state in final.items():
        children = [t for t in final if t.startswith(test + "/")]
        if not children:
            states[test] = state
        elif state == "fail" and not any(final[c] == "fail" for c in children):
            states[test] = "fail"
    why = {t: "".join(output.get(t, [])) for t in states}
    return states, why, "".join(other), pkg_failed


RACE_ONLY = "race detected during execution of test"
# An output line that reports a failure of the test itself: testify's, or
# a t.Fatal/t.Error at a line of a test file. The harness's own t.Log lines
# (`* [plugin ...`) are not failures.
FAILURE_LINE = re.compile(r"Error Trace:|^panic: |_test\.go:\d+: (?!\* \[plugin )\S")


def main():
    path, cmd, version = sys.argv[1:4]
    files, fails, races = read_list(path, version)
    if cmd == "files":
        print("\n".join(files))
        return 0
    kind, report, log, rc = sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])
    left_out = sys.argv[8:]
    rest, pkg_failed = "", False
    if kind == "ginkgo":
        states, why = from_ginkgo(report)
        text = open(log, encoding="utf-8", errors="replace").read()
    else:
        states, why, rest, pkg_failed = from_gotest(report)
        text = rest + "".join(why.values())
    if not states:
        sys.stdout.write(rest[-4000:])
        print(f"upstream NRI {version} pkg/adaptation suite on nri-rs: did not run (build failed or no test found)")
        return 1

    # Races the list names (in upstream's test harness) fail a test or the
    # run only through the race detector; such a failure is excused, and
    # said. A race entry may go unseen: races are not reproducible.
    seen = races_in(text)
    unlisted_races = sorted(set(r for r in seen if r not in races))
    excused = []
    if seen and not unlisted_races:
        for t, st in states.items():
            out = why.get(t, "")
            if st == "fail" and RACE_ONLY in out and not any(
                    FAILURE_LINE.search(line) for line in out.splitlines() if RACE_ONLY not in line):
                states[t] = "pass"
                excused.append(t)

    count = {s: sum(1 for v in states.values() if v == s) for s in ("pass", "fail", "skip")}
    listed = set(fails)
    unexpected = sorted(t for t, s in states.items() if s == "fail" and t not in listed)
    passed = sorted(t for t in listed if states.get(t) == "pass")
    skipped = sorted(t for t in listed if states.get(t) == "skip")
    absent = sorted(t for t in listed if t not in states)
    known = []
    if listed:
        known.append(f"{len(listed)} listed failure{'s' if len(listed) != 1 else ''}")
    if seen and not unlisted_races:
        known.append(f"listed race in upstream's harness seen {len(seen)}x")
    if left_out:
        known.append("left out: " + ", ".join(left_out))
    print(f"upstream NRI {version} pkg/adaptation suite on nri-rs: {count['pass']} passed, "
          f"{count['fail']} failed, {count['skip']} skipped (known differences: {'; '.join(known) or 'none'})")
    for t in unexpected:
        print(f"  FAIL, not in {path.rsplit('/', 1)[-1]}: {t}")
        for line in why.get(t, "").strip().splitlines()[-15:]:
            print(f"      {line}")
    for r in unlisted_races:
        print(f"  DATA RACE, not in {path.rsplit('/', 1)[-1]}: {r}")
    for t in excused:
        print(f"  passed but for the listed race: {t}")
    for label, names in (("listed as failing but passed", passed),
                         ("listed as failing but skipped", skipped),
                         ("listed as failing but not in this suite", absent)):
        for t in names:
            print(f"  {label}: {t}")
    bad = bool(unexpected or passed or skipped or absent or unlisted_races)
    # The listed race accounts for a failed run only if the race detector
    # is what failed it (and, for ginkgo, every spec passed).
    race_failed = seen and not unlisted_races and "race detected" in text and (
        kind != "ginkgo" or "SUCCESS! -- " in text)
    if count["fail"] == 0 and (pkg_failed or rc != 0) and not race_failed:
        # No test failed, yet `go test` did (a crash outside the tests, a
        # race of its own): say so rather than report success.
        sys.stdout.write(rest[-4000:])
        print("  the test binary failed outside any test")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
