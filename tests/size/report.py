#!/usr/bin/env python3
"""What nri-rs adds to a runtime's binary, measured.

A small Go runtime host (host.go.in: New, Start and Stop of an
Adaptation) is built twice in a scratch module, once on upstream's
pkg/adaptation (the release go/go.mod requires) and once on go/adaptation
over the libnri.a in --lib-dir, both with cgo as a runtime daemon builds,
and both stripped; the difference is what a Go runtime's binary grows by.
Next to it: libnri.a's size, and its machine code and data by the crate
each symbol belongs to (nm's sizes, a symbol counted for the first crate
of ours or of crates.io its name mentions, so that std's generic code,
drop glue above all, is counted for the crate it was instantiated for).

  report.py [--lib-dir DIR] [--limit-mb N] [--json FILE] [--doc FILE]
  report.py --json FILE [--doc FILE] --daemon NAME VERSION STOCK NRI_RS ...

--limit-mb fails (exit 1) when the host grows by more than N MB (10^6
bytes); --json writes the measurements; --doc replaces the generated
section of a markdown file (between the size-report markers) with them.
The figures of real daemons (--json's "daemons") are kept as they are.

With --daemon (tests/size/daemons.sh, `make size-daemons`), nothing of the
above is measured: the daemon NAME (containerd, crio) of VERSION, its
unstripped binaries built stock (STOCK) and with nri-rs (NRI_RS), is
measured stripped (`strip --strip-all` on a copy) into --json's "daemons",
the rest of that file kept, and --doc rewritten from it.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UPSTREAM = "github.com/containerd/nri"
OURS = "github.com/nri-rs/nri-rs/go"
BEGIN = "<!-- size-report:begin (tests/size/report.py writes this section) -->"
END = "<!-- size-report:end -->"
STD = {"core", "alloc", "std", "compiler_builtins", "panic_unwind", "std_detect"}
# nm's symbol types that take room in the file: code, read-only and
# initialized data, weak symbols (not .bss, which is only a size).
FILE_TYPES = set("tTrRdDvVwW")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE, **kw).stdout


def upstream_version():
    out = run(["go", "list", "-m", "-f", "{{.Version}}", UPSTREAM], cwd=os.path.join(ROOT, "go"))
    return out.strip()


def build_hosts(work, lib_dir):
    """Builds both hosts; their stripped sizes in bytes."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    gomod = open(os.path.join(ROOT, "go", "go.mod")).read()
    gomod = re.sub(r"^module .*$", "module nri-rs.test/sizehost", gomod, count=1, flags=re.M)
    gomod += f"\nrequire {OURS} v0.0.0\n\nreplace {OURS} => {os.path.join(ROOT, 'go')}\n"
    with open(os.path.join(work, "go.mod"), "w") as f:
        f.write(gomod)
    shutil.copy(os.path.join(ROOT, "go", "go.sum"), os.path.join(work, "go.sum"))
    template = open(os.path.join(os.path.dirname(__file__), "host.go.in")).read()
    env = dict(os.environ, GOWORK="off", GOFLAGS="-mod=mod", CGO_ENABLED="1",
               PKG_CONFIG_PATH=os.path.join(lib_dir, "pkgconfig"))
    # Only nri.pc's flags, as in a runtime's build, but for a stamp of the
    # library: Go's build cache sees neither pkg-config's answer nor the
    # archive, and would link the host it linked last (see the Makefile).
    for k in ("CGO_LDFLAGS", "CGO_CPPFLAGS"):
        env.pop(k, None)
    with open(os.path.join(lib_dir, "libnri.a"), "rb") as f:
        stamp = hashlib.sha256(f.read()).hexdigest()[:16]
    env["CGO_CFLAGS"] = f"-O2 -g -DNRI_LIB_STAMP={stamp}"
    sizes = {}
    for name, pkg in (("upstream", UPSTREAM + "/pkg/adaptation"), ("nri-rs", OURS + "/adaptation")):
        os.makedirs(os.path.join(work, name))
        with open(os.path.join(work, name, "main.go"), "w") as f:
            f.write(template.replace("@ADAPTATION@", pkg))
        out = os.path.join(work, name + ".bin")
        run(["go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./" + name], cwd=work, env=env)
        run(["strip", "--strip-all", out])
        sizes[name] = os.path.getsize(out)
    return sizes


def installed_size(lib, work):
    """libnri.a's size as `make install` installs it: stripped of what a
    linker does not need (debug sections, local symbols)."""
    out = os.path.join(work, "libnri-installed.a")
    run(["strip", "--strip-unneeded", "-o", out, lib])
    return os.path.getsize(out)


def crate_of(name):
    """The crate a demangled symbol is counted for."""
    # A path's first segment: at the start, or after what opens a type.
    tokens = re.findall(r"(?:^|[<\s(\[&*,])([A-Za-z_][A-Za-z0-9_]*)::", name)
    if not tokens:
        return "(C, assembly, anonymous data)"
    for t in tokens:
        if t not in STD and t[0].islower():
            return t
    return "std" if tokens[0] != "compiler_builtins" else "compiler_builtins"


def by_crate(lib):
    out = run(["nm", "--defined-only", "-S", "-C", lib], stderr=subprocess.DEVNULL)
    sizes = {}
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[2] not in FILE_TYPES:
            continue
        try:
            size = int(parts[1], 16)
        except ValueError:
            continue
        crate = crate_of(parts[3])
        sizes[crate] = sizes.get(crate, 0) + size
    return sizes


def stripped_size(binary, work):
    out = os.path.join(work, os.path.basename(binary) + ".stripped")
    shutil.copy(binary, out)
    run(["strip", "--strip-all", out])
    return os.path.getsize(out)


def measure_daemon(version, stock, nri_rs):
    """A daemon's entry of "daemons": both builds' stripped sizes."""
    with tempfile.TemporaryDirectory() as work:
        sizes = {}
        for name, binary in (("stock", stock), ("nri-rs", nri_rs)):
            os.makedirs(os.path.join(work, name))
            sizes[name] = stripped_size(binary, os.path.join(work, name))
    static = "INTERP" not in run(["readelf", "-lW", nri_rs])
    return {"version": version, "static": static, "date": datetime.date.today().isoformat(),
            "go": run(["go", "env", "GOVERSION"]).strip(),
            "stock": sizes["stock"], "nri-rs": sizes["nri-rs"], "growth": sizes["nri-rs"] - sizes["stock"]}


DAEMON_NAMES = {"containerd": "containerd", "crio": "CRI-O"}


def daemon_rows(daemons):
    rows = []
    for name, d in daemons.items():
        what = f"{DAEMON_NAMES.get(name, name)} {d['version']} ({'static' if d['static'] else 'dynamic'})"
        rows += [
            f"| {what}, stock, stripped | {mb(d['stock'])} MB |",
            f"| {what} with nri-rs, stripped | {mb(d['nri-rs'])} MB |",
            f"| **Growth of {DAEMON_NAMES.get(name, name)}** | **+{mb(d['growth'])} MB** |",
        ]
    return rows


def mb(n):
    return f"{n / 1e6:.1f}"


def markdown(r):
    h = r["host"]
    lines = [
        BEGIN,
        "",
        f"Measured {r['date']} by `make size` (`tests/size/report.py`), {r['go']},"
        f" {r['rustc']}; libnri.a {r['features']}. MB are 10^6 bytes.",
    ]
    daemons = r.get("daemons") or {}
    if daemons:
        when = ", ".join(sorted({f"{d['date']} with {d['go']}" for d in daemons.values()}))
        lines[-1] += (f" The daemons' rows: measured {when} by `make size-daemons`"
                      " (`tests/size/daemons.sh`), each daemon built as `make e2e` builds it.")
    lines += [
        "",
        "| What | Size |",
        "|---|---|",
        f"| Go host on upstream's `pkg/adaptation` {r['upstream']}, stripped | {mb(h['upstream'])} MB |",
        f"| The same host on `go/adaptation`, stripped | {mb(h['nri-rs'])} MB |",
        f"| **Growth** (`make test` fails above {mb(r['limit'])} MB) | **+{mb(h['growth'])} MB** |",
        *daemon_rows(daemons),
        f"| `libnri.a` as built (`target/release`) | {mb(r['libnri_a']['file'])} MB |",
        f"| `libnri.a` as `make install` installs it (`strip --strip-unneeded`) | {mb(r['libnri_a']['installed'])} MB |",
        f"| `libnri.a`, code and data of its symbols | {mb(r['libnri_a']['symbols'])} MB |",
        "",
        "`libnri.a`'s code and data by crate (a generic function counted for the"
        " first crate its name mentions that is not the standard library's):",
        "",
        "| Crate | MB | Share |",
        "|---|---:|---:|",
    ]
    total = r["libnri_a"]["symbols"] or 1
    shown, rest = r["crates"][:15], r["crates"][15:]
    for c in shown:
        lines.append(f"| `{c['crate']}` | {c['bytes'] / 1e6:.2f} | {100 * c['bytes'] / total:.0f} % |")
    if rest:
        n = sum(c["bytes"] for c in rest)
        lines.append(f"| {len(rest)} others | {n / 1e6:.2f} | {100 * n / total:.0f} % |")
    lines += ["", END]
    return "\n".join(lines)


def write(r, json_file, doc_file):
    if json_file:
        with open(json_file, "w") as f:
            json.dump(r, f, indent=2)
            f.write("\n")
    if doc_file:
        doc = open(doc_file).read()
        i, j = doc.find(BEGIN), doc.find(END)
        if i < 0 or j < i:
            sys.exit(f"size: {doc_file} has no generated section ({BEGIN} ... {END})")
        with open(doc_file, "w") as f:
            f.write(doc[:i] + markdown(r) + doc[j + len(END):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib-dir", default=os.path.join(ROOT, "target", "release"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "size"))
    ap.add_argument("--limit-mb", type=float, default=5.0)
    ap.add_argument("--features", default="default features")
    ap.add_argument("--json")
    ap.add_argument("--doc")
    ap.add_argument("--daemon", nargs=4, action="append", metavar=("NAME", "VERSION", "STOCK", "NRI_RS"))
    a = ap.parse_args()
    old = {}
    if a.json and os.path.exists(a.json):
        with open(a.json) as f:
            old = json.load(f)
    if a.daemon:
        if not a.json or "host" not in old:
            sys.exit("size: --daemon adds to the figures of --json FILE, which `make size` writes first")
        old.setdefault("daemons", {})
        for name, version, stock, nri_rs in a.daemon:
            d = old["daemons"][name] = measure_daemon(version, stock, nri_rs)
            print(f"size: {DAEMON_NAMES.get(name, name)} {version}, stripped: {mb(d['stock'])} MB stock, "
                  f"{mb(d['nri-rs'])} MB with nri-rs: +{mb(d['growth'])} MB ({d['growth']} bytes)")
        write(old, a.json, a.doc)
        return

    a.lib_dir, a.work = os.path.abspath(a.lib_dir), os.path.abspath(a.work)
    lib = os.path.join(a.lib_dir, "libnri.a")
    if not os.path.exists(os.path.join(a.lib_dir, "pkgconfig", "nri.pc")):
        sys.exit(f"size: no nri.pc in {a.lib_dir}/pkgconfig (make pkgconfig NRI_LIB_DIR=...)")
    hosts = build_hosts(a.work, a.lib_dir)
    crates = by_crate(lib)
    r = {
        "date": datetime.date.today().isoformat(),
        "go": run(["go", "env", "GOVERSION"]).strip(),
        "rustc": run(["rustc", "-V"]).strip().split(" (")[0],
        "upstream": upstream_version(),
        "features": a.features,
        "limit": int(a.limit_mb * 1e6),
        "host": dict(hosts, growth=hosts["nri-rs"] - hosts["upstream"]),
        "libnri_a": {"file": os.path.getsize(lib), "installed": installed_size(lib, a.work),
                     "symbols": sum(crates.values())},
        "crates": [{"crate": c, "bytes": n} for c, n in sorted(crates.items(), key=lambda kv: -kv[1])],
    }
    if "daemons" in old:
        r["daemons"] = old["daemons"]
    h = r["host"]
    print(f"size: Go host {mb(h['upstream'])} MB on upstream {r['upstream']}, "
          f"{mb(h['nri-rs'])} MB on go/adaptation: +{mb(h['growth'])} MB (limit {a.limit_mb} MB); "
          f"libnri.a {mb(r['libnri_a']['file'])} MB, installed {mb(r['libnri_a']['installed'])} MB")
    write(r, a.json, a.doc)
    if h["growth"] > r["limit"]:
        sys.exit(f"size: the Go host grows by {mb(h['growth'])} MB, more than the {a.limit_mb} MB allowed "
                 "(docs/INTEGRATION.md, \"What a runtime's binary gains and costs\")")


if __name__ == "__main__":
    main()
