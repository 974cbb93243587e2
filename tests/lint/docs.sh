#!/usr/bin/env bash
# The documentation stays inside the repository: every relative link of a
# tracked Markdown file names a file or directory that exists (anchors are
# not checked), no link or path leaves the repository, and no page speaks
# of issue numbers, which mean nothing to a reader of the repository.
set -euo pipefail

cd "$(dirname "$0")/../.."
git ls-files -z -- '*.md' | python3 -c '
import os, re, sys

status = 0
def fail(path, n, msg):
    global status
    print(f"docs: {path}:{n}: {msg}", file=sys.stderr)
    status = 1

link = re.compile(r"\]\(([^)\s]+)\)")
for path in sys.stdin.read().split("\0"):
    if not path:
        continue
    text = open(path, encoding="utf-8").read()
    fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        if re.search(r"\bissues? #?\d+\b", line, re.I):
            fail(path, n, "speaks of an issue number")
        if "../shared/" in line:
            fail(path, n, "names a file outside the repository")
        if fence:
            continue
        for target in link.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            file = target.split("#", 1)[0]
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file))
            if resolved.startswith(".."):
                fail(path, n, f"link {target} leaves the repository")
            elif not os.path.exists(resolved):
                fail(path, n, f"link {target}: no such file")
sys.exit(status)
'
echo "docs: links resolve and stay inside the repository"

# Measured figures in hand-written text come from the committed results.
python3 tests/lint/figures.py

# The pages a newcomer reads first stay at reader size: README is an entry
# point, the reports are results and method (the history is in git log).
for limit in README.md:200 docs/PERFORMANCE.md:300 docs/RELIABILITY.md:300; do
    file=${limit%:*} max=${limit#*:}
    lines=$(wc -l < "$file")
    if [ "$lines" -gt "$max" ]; then
        echo "docs: $file has $lines lines, more than $max: say less, or link" >&2
        exit 1
    fi
done
echo "docs: README.md, PERFORMANCE.md and RELIABILITY.md within their sizes"
