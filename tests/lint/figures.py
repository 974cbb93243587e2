#!/usr/bin/env python3
"""The docs figure check: a measured figure in hand-written documentation
must come from one of the committed result files, so that a quote cannot
go stale when the measurement is run again.

A figure is verified when an HTML comment naming where it comes from
follows it on the same line:

    0.43× <!-- fig ratio("create-typical-4", "cpu_us_per_op") -->

The comment holds a Python expression over the helpers below; the last
number before the comment must equal its value rounded to as many
decimals as the figure is written with (`0.43` against 0.4339...;
thousands separators allowed). The expression gives the value in the
unit the text uses (`size("host", "growth") / 1e6` for megabytes).

Checked: the Markdown files at the top of the repository (README.md,
CONTRIBUTING.md, ...) and docs/*.md, except code (fenced, indented, inline)
and generated sections: from an HTML comment that says "generated" or
"<name>:begin" to one that starts with "end" or "<name>: end"; their
generators write them from the same files.

It fails on:
  - a fig comment whose expression does not evaluate, or whose value does
    not match the figure before it;
  - a ratio (a number followed at once by "x" or "×", as in 0.52× or 5x)
    in hand-written text that no fig comment verifies.
Figures from docs/e2e.json are skipped while that file does not exist.

    figures.py [FILE...]   (default: *.md and docs/*.md)
"""

import glob
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOCS = os.path.join(ROOT, "docs")


class Absent(Exception):
    """A result file that does not exist yet (docs/e2e.json)."""


_cache = {}


def load(name):
    if name not in _cache:
        path = os.path.join(DOCS, name)
        if not os.path.exists(path):
            raise Absent(name)
        with open(path, encoding="utf-8") as f:
            _cache[name] = json.load(f)
    return _cache[name]


def get(name, *keys):
    """The value at keys in docs/<name>: a key of an object, an index of a
    list, or "k=v[,k2=v2]" to pick the list element whose fields match."""
    v = load(name)
    for k in keys:
        if isinstance(v, list) and isinstance(k, str) and "=" in k:
            want = dict(p.split("=", 1) for p in k.split(","))
            hits = [e for e in v if all(str(e.get(a)) == b for a, b in want.items())]
            if len(hits) != 1:
                raise KeyError(f"{name}: {len(hits)} elements match {k}")
            v = hits[0]
        else:
            v = v[k]
    return v


# performance.json (make bench)
def perf(case, impl, stub, metric):
    """A configuration's figure in a bench case, e.g.
    perf("create-typical-4", "nri-rs", "go", "cpu_us_per_op")."""
    return get("performance.json", "cases", f"name={case}", "configs", f"impl={impl},stub={stub}", metric)


def ratio(case, metric, stub="go", ours=None):
    """nri-rs's figure over upstream's in a bench case, plugins on the
    given stub (ours: nri-rs's configuration when it differs, e.g.
    "go-pods" for pod concurrency, "wasm-first" for a cold WASM start)."""
    return perf(case, "nri-rs", ours or stub, metric) / perf(case, "upstream", stub, metric)


def instructions(plugins, **flags):
    """The core's instructions per event (callgrind) with that many plugins."""
    rows = [r for r in load("performance.json")["instructions"]
            if r["plugins"] == plugins and all(r.get(k) == v for k, v in flags.items())
            and not any(r.get(k) for k in ("default_validator", "audit_log", "lent_wasm") if k not in flags)]
    if len(rows) != 1:
        raise KeyError(f"performance.json: {len(rows)} instruction rows for {plugins} plugins {flags}")
    return rows[0]["instructions_per_event"]


# size.json (make size)
def size(*keys):
    """size("host", "growth") in bytes."""
    return get("size.json", *keys)


# soak.json (make soak)
def soak(impl, *keys):
    """A soak run's figure: soak("nri-rs", "seconds")."""
    return get("soak.json", "runs", f"impl={impl}", *keys)


def soak_end(impl, series):
    """A soak series' last sample: soak_end("nri-rs", "rss_kib")."""
    return soak(impl, "samples")[-1][series]


def soak_rate(impl):
    """Lifecycles per second of a soak run."""
    return get("soak.json", "settings", "lifecycles") / soak(impl, "seconds")


# conformance.json (make conformance)
def conformance(version, key):
    """conformance("v0.12.5", "passed"): upstream's suite of that release."""
    return get("conformance.json", "upstream_suite", version, key)


def conformance_total(version):
    return sum(conformance(version, k) for k in ("passed", "failed", "skipped"))


# e2e.json (make e2e)
def e2e(daemon, suite, key):
    """e2e("containerd", "nri_e2e", "passed")."""
    return get("e2e.json", daemon, suite, key)


HELPERS = {f.__name__: f for f in (get, perf, ratio, instructions, size, soak, soak_end, soak_rate,
                                    conformance, conformance_total, e2e)}
HELPERS.update(min=min, max=max, round=round, abs=abs)

FIG = re.compile(r"<!--\s*fig\s+(.*?)\s*-->")
COMMENT = re.compile(r"<!--.*?-->")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# 0.52x, 5×: a number followed at once by x or ×, not part of a word or
# of a hex literal.
RATIO = re.compile(r"(?<![\w.,])\d+(?:\.\d+)?[x×](?!\w)")
OPEN = re.compile(r"<!--(?![^>]*\bfig\b)[^>]*(\bgenerated\b|[\w-]+:begin\b)")
CLOSE = re.compile(r"<!--\s*(?:[\w-]+:\s*)?end\b")


def blank(m):
    return " " * len(m.group(0))


def check_value(written, value):
    digits = written.split(".")[1] if "." in written else ""
    want = float(written.replace(",", ""))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"evaluates to {value!r}, not a number"
    if round(value, len(digits)) != round(want, len(digits)):
        shown = f"{value:.{len(digits)}f}"
        return f"says {written} but the results say {shown}"
    return None


def check_file(path):
    errors, checked, skipped = [], 0, 0
    rel = os.path.relpath(path, ROOT)
    fence = generated = False
    prev_blank = True
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        stripped = line.lstrip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fence = not fence
            prev_blank = False
            continue
        if fence:
            continue
        if generated:
            if CLOSE.search(line):
                generated = False
            continue
        if OPEN.search(line) and not CLOSE.search(line):
            generated = True
            continue
        # An indented code block: four spaces after a blank line (not a
        # list item's continuation, which follows text).
        if line.startswith("    ") and prev_blank and not stripped.startswith(("-", "*", "|")):
            continue
        prev_blank = not line.strip()

        masked = CODE_SPAN.sub(blank, line)
        for m in FIG.finditer(masked):
            expr = line[m.start(1):m.end(1)]
            before = COMMENT.sub(blank, masked[:m.start()])
            nums = NUMBER.findall(before)
            if not nums:
                errors.append(f"{rel}:{n}: fig comment with no figure before it: {expr}")
                continue
            try:
                value = eval(expr, {"__builtins__": {}}, HELPERS)  # noqa: S307 (our own docs)
            except Absent:
                skipped += 1
                continue
            except Exception as e:  # noqa: BLE001
                errors.append(f"{rel}:{n}: fig {expr}: {type(e).__name__}: {e}")
                continue
            bad = check_value(nums[-1], value)
            if bad:
                errors.append(f"{rel}:{n}: {bad} ({expr})")
            checked += 1
        text = COMMENT.sub(blank, masked)
        for m in RATIO.finditer(text):
            rest = masked[m.end():]
            if re.match(r"[\s*_)]*<!--\s*fig\b", rest):
                continue
            errors.append(f"{rel}:{n}: ratio {m.group(0)} is not verified: add a fig comment "
                          "naming its result (tests/lint/figures.py) or link to the report")
    return errors, checked, skipped


def main(argv):
    files = argv[1:] or sorted(glob.glob(os.path.join(ROOT, "*.md"))) + sorted(glob.glob(os.path.join(DOCS, "*.md")))
    errors, checked, skipped = [], 0, 0
    for path in files:
        e, c, s = check_file(path)
        errors += e
        checked += c
        skipped += s
    for e in errors:
        print(f"figures: {e}", file=sys.stderr)
    if errors:
        print(f"figures: {len(errors)} figure(s) not verified against docs/*.json "
              "(how to mark one: CONTRIBUTING.md, \"Figures in the docs\")", file=sys.stderr)
        return 1
    print(f"figures: {checked} figures match docs/*.json" + (f" ({skipped} skipped: result file absent)" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
