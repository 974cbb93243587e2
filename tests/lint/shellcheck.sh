#!/usr/bin/env bash
# Runs shellcheck (default severity, -x to follow sourced files) on every
# shell script git tracks: files ending in .sh or .bash, and files whose
# first line is a #! naming sh, bash, dash or ksh (e.g. .ci/run). Checks
# each script on its own and fails with the list of those that have
# findings. Scripts that source others say where to look with a
# `# shellcheck source-path=...` directive of their own.
#
#   tests/lint/shellcheck.sh          check them all
#   tests/lint/shellcheck.sh --list   print the scripts it would check
#
# SHELLCHECK names the binary (default: shellcheck from PATH; Debian's
# package shellcheck, which .ci/run installs).
set -euo pipefail

cd "$(dirname "$0")/../.."
shellcheck=${SHELLCHECK:-shellcheck}

# is_shell FILE: FILE's first line is a shell #! (a plain path or via env).
shebang='^#![[:space:]]*([^[:space:]]*/)?(env[[:space:]]+(-S[[:space:]]+)?)?([^[:space:]]*/)?(sh|bash|dash|ksh)([[:space:]]|$)'
is_shell() {
    local first=
    IFS= read -r first <"$1" 2>/dev/null || [ -n "$first" ] || return 1
    [[ $first =~ $shebang ]]
}

command -v git >/dev/null || { echo "shellcheck.sh: git not found (it lists the scripts)" >&2; exit 1; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "shellcheck.sh: $(pwd) is not a git work tree (the scripts are the files git tracks)" >&2; exit 1; }

scripts=()
while IFS= read -r -d '' f; do
    # Tracked but deleted or not a regular file (symlink, submodule): skip.
    if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
    case "$f" in
    *.sh | *.bash) scripts+=("$f") ;;
    *) if LC_ALL=C is_shell "$f"; then scripts+=("$f"); fi ;;
    esac
done < <(git ls-files -z)

if [ "${1:-}" = --list ]; then
    printf '%s\n' "${scripts[@]}"
    exit 0
fi
[ "${#scripts[@]}" -gt 0 ] || { echo "shellcheck.sh: git tracks no shell script here" >&2; exit 1; }
command -v "$shellcheck" >/dev/null ||
    { echo "shellcheck.sh: $shellcheck not found: apt-get install shellcheck" >&2; exit 1; }

echo "shellcheck.sh: $("$shellcheck" --version | sed -n 's/^version: /shellcheck /p') on ${#scripts[@]} scripts"
failed=()
for f in "${scripts[@]}"; do
    "$shellcheck" -x "$f" || failed+=("$f")
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "shellcheck.sh: ${#failed[@]} of ${#scripts[@]} scripts have findings:" >&2
    printf '    %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "shellcheck.sh: all ${#scripts[@]} scripts are clean"
