#!/bin/sh
# Fails unless every function include/nri.h declares is called by a C
# test: a `name(` in a test_*.c or test_*.cc of tests/c, comments stripped
# (a call through a table or a mention in a comment does not count).
# Usage: check-exports.sh [crates/nri-capi/include/nri.h] [tests/c]
set -eu
header=${1:-crates/nri-capi/include/nri.h}
dir=${2:-$(dirname "$0")}

# Comments out, no includes expanded: the code as the compiler sees it.
strip() { ${CC:-cc} -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null; }

# Declarations: `type name(` outside comments; function-pointer typedefs
# and struct fields are `(*name)(` and do not match.
exports=$(strip "$header" | grep -oE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]nri_[a-z0-9_]+\(' |
          grep -oE 'nri_[a-z0-9_]+\($' | tr -d '(' | sort -u)
[ -n "$exports" ] || { echo "check-exports: no functions found in $header" >&2; exit 1; }

calls=$(for f in "$dir"/test_*.c "$dir"/test_*.cc; do strip "$f"; done |
        grep -oE '\bnri_[a-z0-9_]+[[:space:]]*\(' | grep -oE 'nri_[a-z0-9_]+' | sort -u)

total=0 missing=0
for fn in $exports; do
    total=$((total + 1))
    if ! printf '%s\n' "$calls" | grep -qx "$fn"; then
        echo "check-exports: $fn (include/nri.h) is called by no C test" >&2
        missing=$((missing + 1))
    fi
done
if [ "$missing" -gt 0 ]; then
    echo "check-exports: $missing of $total exported functions untested" >&2
    exit 1
fi
echo "check-exports: all $total functions of $(basename "$header") are called by C tests"
