#!/usr/bin/env python3
"""No import circles inside a crate, between its modules or its folders.

Cargo refuses circles between crates, but not between the modules of one
crate, and a circle there means no module in it can be read, tested or
moved alone. This reads a crate's `src/`, resolves every `crate::`,
`super::`, `self::` and child-module path outside test code to the module
that defines it (following `pub use` re-exports), and fails on:

  * a circle between modules (one file is one module; a module may use
    its ancestors, whose parts it is: a folder's mod.rs often holds the
    types its files implement);
  * a circle between the crate's top-level parts (a folder with all it
    holds, or a top-level file): the folders are layers, and each may only
    use the ones below it.

On success it prints the top-level parts from the bottom layer up.

Usage: modules.py CRATE_SRC_DIR...
"""

import os
import re
import sys
from collections import defaultdict


def module_files(src):
    """Module path (tuple) -> file, for every .rs file under src."""
    mods = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            parts = tuple(os.path.relpath(path, src)[:-3].split(os.sep))
            if parts[-1] == "mod":
                parts = parts[:-1]
            if parts in (("lib",), ("main",)):
                parts = ()
            mods[parts] = path
    return mods


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def block_end(text, start):
    """Index just past the brace block opening at or after start."""
    depth = 0
    for i in range(text.index("{", start), len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def without_test_code(text):
    """The text without inline `#[cfg(test)] mod x { ... }` blocks."""
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        pos = block_end(text, m.end() - 1)
    out.append(text[pos:])
    return "".join(out)


def test_modules(text):
    """Names of child modules declared `#[cfg(test)] mod x;` (test files)."""
    return set(re.findall(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text))


def use_tree(text, pos):
    """Parses a use tree at text[pos:] (after its leading `::` or start):
    returns (list of paths as tuples, end index)."""
    paths = []
    m = re.compile(r"\s*").match(text, pos)
    pos = m.end()
    if text.startswith("{", pos):
        pos += 1
        while True:
            m = re.compile(r"\s*").match(text, pos)
            pos = m.end()
            if text.startswith("}", pos):
                return paths, pos + 1
            sub, pos = use_tree(text, pos)
            paths.extend(sub)
            m = re.compile(r"\s*,?").match(text, pos)
            pos = m.end()
    m = re.compile(r"(\w+|\*)").match(text, pos)
    if not m:
        return paths, pos
    head, pos = m.group(1), m.end()
    if text.startswith("::", pos):
        subs, pos = use_tree(text, pos + 2)
        return [(head,) + s for s in subs] or [(head,)], pos
    m = re.compile(r"\s+as\s+\w+").match(text, pos)
    if m:
        pos = m.end()
    return [(head,)], pos


def references(text):
    """Every path the module names: (anchor, path) with anchor one of
    'crate', 'super', 'self' or 'bare' (a `use` of a child module)."""
    refs = []
    for m in re.finditer(r"\b(crate|super|self)\s*::", text):
        anchor = m.group(1)
        if anchor == "super" and text[max(0, m.start() - 7):m.start()].endswith("super::"):
            continue  # the second `super` of super::super, read with the first
        pos, ups = m.end(), 0
        while anchor == "super" and re.compile(r"\s*super\s*::").match(text, pos):
            pos = re.compile(r"\s*super\s*::").match(text, pos).end()
            ups += 1
        paths, _ = use_tree(text, pos)
        for p in paths:
            refs.append((anchor, ups, p))
    for m in re.finditer(r"\buse\s+(?!crate\b|super\b|self\b|::)(\w+)\s*::", text):
        paths, _ = use_tree(text, m.start(1))
        for p in paths:
            refs.append(("bare", 0, p))
    return refs


def reexports(mods, texts):
    """(module, name) -> absolute path it re-exports."""
    table = {}
    for mod, text in texts.items():
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+", text):
            start = m.end()
            anchor, ups = "bare", 0
            am = re.compile(r"(crate|super|self)\s*::").match(text, start)
            if am:
                anchor, start = am.group(1), am.end()
            paths, _ = use_tree(text, start)
            for p in paths:
                absolute = anchor_path(mod, anchor, ups, p, mods)
                if absolute and p[-1] not in ("self", "*"):
                    table[(mod, p[-1])] = absolute
    return table


def anchor_path(mod, anchor, ups, path, mods):
    if anchor == "crate":
        return path
    if anchor == "self":
        return mod + path
    if anchor == "super":
        base = mod[: len(mod) - 1 - ups] if len(mod) > ups else ()
        return base + path
    # bare: a child module of this one, else an outside crate
    if mod + path[:1] in mods:
        return mod + path
    return None


def resolve(path, mods, table, seen=0):
    """The module defining `path` (a tuple), following re-exports."""
    best = ()
    for i in range(len(path), 0, -1):
        if path[:i] in mods:
            best = path[:i]
            break
    rest = path[len(best):]
    if rest and (best, rest[0]) in table and seen < 16:
        return resolve(table[(best, rest[0])] + rest[1:], mods, table, seen + 1)
    return best


def check(src):
    mods = module_files(src)
    skip = set()
    for mod, path in mods.items():
        for name in test_modules(strip_comments(open(path).read())):
            skip.add(mod + (name,))
    # a test file's own children are test code too
    for mod in list(mods):
        if any(mod[: len(s)] == s for s in skip):
            skip.add(mod)
    texts = {m: without_test_code(strip_comments(open(p).read()))
             for m, p in mods.items() if m not in skip}
    table = reexports(mods, texts)
    edges = defaultdict(set)
    for mod, text in texts.items():
        if mod == ():
            continue  # the crate root re-exports; it is no layer
        for anchor, ups, path in references(text):
            absolute = anchor_path(mod, anchor, ups, path, mods)
            if not absolute:
                continue
            target = resolve(absolute, mods, table)
            if target and target != mod and target not in skip and mod[: len(target)] != target:
                edges[mod].add(target)
    status = 0
    names = lambda c: " ".join(sorted("::".join(m) for m in c))
    for cycle in circles(set(texts) - {()}, edges):
        print(f"modules: {src}: these modules import each other in a circle: {names(cycle)}",
              file=sys.stderr)
        for m in sorted(cycle):
            inside = sorted("::".join(t) for t in edges[m] if t in cycle)
            print(f"  {'::'.join(m)} -> {', '.join(inside)}", file=sys.stderr)
        status = 1
    module_circles = {frozenset(m[:1] for m in c) for c in circles(set(texts) - {()}, edges)}
    tops = defaultdict(set)
    for a, targets in edges.items():
        for b in targets:
            if a[0] != b[0]:
                tops[a[:1]].add(b[:1])
    parts = {m[:1] for m in texts if m}
    for cycle in circles(parts, tops):
        if frozenset(cycle) in module_circles:
            continue  # said above: the circle's modules are the parts
        print(f"modules: {src}: these folders or top-level modules use each other: {names(cycle)}",
              file=sys.stderr)
        for a, targets in sorted(edges.items()):
            for b in sorted(targets):
                if a[:1] in cycle and b[:1] in cycle and a[0] != b[0]:
                    print(f"  {'::'.join(a)} -> {'::'.join(b)}", file=sys.stderr)
        status = 1
    if status == 0 and len(texts) > 2:
        order = layers(parts, tops)
        print(f"modules: {src}: {len(texts) - 1} modules, no circle; layers from the bottom: "
              + " < ".join(" ".join(sorted(p[0] + ("/" if is_folder(src, p) else "") for p in layer))
                           for layer in order))
    return status


def is_folder(src, part):
    return os.path.isdir(os.path.join(src, part[0]))


def circles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in nodes:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def layers(nodes, edges):
    """Nodes grouped by height: each layer uses only layers before it."""
    height = {}

    def h(v):
        if v not in height:
            height[v] = 0
            height[v] = 1 + max((h(w) for w in edges.get(v, ()) if w in nodes), default=-1)
        return height[v]

    for v in nodes:
        h(v)
    out = defaultdict(set)
    for v, k in height.items():
        out[k].add(v)
    return [out[k] for k in sorted(out)]


if __name__ == "__main__":
    sys.exit(max((check(src) for src in sys.argv[1:]), default=0))
