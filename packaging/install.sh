#!/usr/bin/env bash
# `make install` and `make uninstall` (docs/PACKAGING.md). Install copies
# what `make release` built and compiles nothing, so it runs as root on a
# tree a user built; it fails, installing nothing, when something is
# missing. It writes the list of the files it put into
# DATADIR/nri-rs/installed-files, which uninstall removes, and then the
# directories of nri-rs's own that are left empty.
#
#   install.sh install | uninstall | pc PREFIX LIBDIR INCLUDEDIR
#
# The Makefile passes, in the environment: DESTDIR, PREFIX, BINDIR, LIBDIR,
# INCLUDEDIR, DATADIR, MANDIR, TARGET_DIR (the release build's directory),
# COMPILED_WASM (1: also nri-wasm-compile and its man page), NRI_VERSION,
# NRI_PC_LIBS. `pc` writes nri.pc for the given directories on stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
me="make install"

# nri.pc from its template (crates/nri-capi/nri.pc.in).
write_pc() { # PREFIX LIBDIR INCLUDEDIR
    sed -e "s|@PREFIX@|$1|" -e "s|@LIBDIR@|$2|" -e "s|@INCLUDEDIR@|$3|" \
        -e "s|@VERSION@|${NRI_VERSION:?}|" -e "s|@NATIVE_LIBS@|${NRI_PC_LIBS?}|" \
        "$root/crates/nri-capi/nri.pc.in"
}

# The go/adaptation sources the overlay writer maps into a runtime's build,
# relative to go/: every file go/adaptation-files.sh may list for some
# release (it picks per release from these at the installed location).
adaptation_sources() {
    (cd "$root/go" && find adaptation -type f \( -name '*.go' -o -name '*.c' -o -name '*.h' \) \
        ! -name '*_test.go' \( -path 'adaptation/_before_v*/*' -o ! -path 'adaptation/*/*' \) | LC_ALL=C sort)
}

manifest() { echo "$DESTDIR$DATADIR/nri-rs/installed-files"; }

do_install() {
    local lib=$TARGET_DIR/release/libnri.a tool=$TARGET_DIR/release/nri-wasm-compile missing=()
    [ -f "$lib" ] || missing+=("$lib")
    if [ "$COMPILED_WASM" = 1 ]; then
        [ -f "$tool" ] || missing+=("$tool")
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        echo "$me: not built: ${missing[*]}" >&2
        echo "$me: run 'make release${NRI_FEATURES:+ NRI_FEATURES=$NRI_FEATURES}' first, as the user who builds (install only copies)" >&2
        exit 1
    fi
    if [ "$COMPILED_WASM" != 1 ] && [ -f "$(manifest)" ] && grep -qx "$BINDIR/nri-wasm-compile" "$(manifest)"; then
        echo "$me: note: the installation there has nri-wasm-compile, this one will not (NRI_FEATURES=compiled-wasm)" >&2
    fi
    local list=()
    # put MODE SRC DEST: install SRC at DESTDIR/DEST, listed.
    put() {
        install -D -m "$1" "$2" "$DESTDIR$3"
        list+=("$3")
    }
    # Stripped of what a linker does not need, as a distribution ships a
    # static library: the debug sections (the standard library's line
    # tables and their relocations) and the local symbols (the names of
    # the core's internal functions), a quarter of the archive. The
    # exported symbols and the unwinding tables stay; a symbolized
    # backtrace needs the unstripped archive of the build tree.
    put 644 "$lib" "$LIBDIR/libnri.a"
    strip --strip-unneeded "$DESTDIR$LIBDIR/libnri.a"
    put 644 "$root/crates/nri-capi/include/nri.h" "$INCLUDEDIR/nri.h"
    install -d "$DESTDIR$LIBDIR/pkgconfig"
    write_pc "$PREFIX" "$LIBDIR" "$INCLUDEDIR" >"$DESTDIR$LIBDIR/pkgconfig/nri.pc"
    chmod 644 "$DESTDIR$LIBDIR/pkgconfig/nri.pc"
    list+=("$LIBDIR/pkgconfig/nri.pc")
    put 644 "$root/crates/nri-api/proto/nri.proto" "$DATADIR/nri-rs/nri.proto"
    # The overlay writer and what it reads: go/adaptation-files.sh and the
    # sources it lists, in the layout it expects (adaptation/ next to it).
    local go=$DATADIR/nri-rs/go f
    put 755 "$root/go/adaptation-files.sh" "$go/adaptation-files.sh"
    while IFS= read -r f; do put 644 "$root/go/$f" "$go/$f"; done < <(adaptation_sources)
    install -d "$DESTDIR$BINDIR"
    sed "s|^go_dir=.*|go_dir=$go|" "$root/tests/e2e/overlay.sh" >"$DESTDIR$BINDIR/nri-rs-overlay"
    chmod 755 "$DESTDIR$BINDIR/nri-rs-overlay"
    grep -qx "go_dir=$go" "$DESTDIR$BINDIR/nri-rs-overlay" ||
        { echo "$me: tests/e2e/overlay.sh has no go_dir= line to point at $go" >&2; exit 1; }
    list+=("$BINDIR/nri-rs-overlay")
    if [ "$COMPILED_WASM" = 1 ]; then
        put 755 "$tool" "$BINDIR/nri-wasm-compile"
        put 644 "$root/packaging/man/nri-wasm-compile.1" "$MANDIR/man1/nri-wasm-compile.1"
    fi
    list+=("$DATADIR/nri-rs/installed-files")
    printf '%s\n' "${list[@]}" >"$(manifest)"
    chmod 644 "$(manifest)"
    echo "$me: ${#list[@]} files under $DESTDIR$PREFIX (listed in $(manifest))"
}

do_uninstall() {
    me="make uninstall"
    local m f d n=0
    m=$(manifest)
    [ -f "$m" ] || { echo "$me: no $m: nothing of nri-rs is installed there (or PREFIX/DATADIR differ from install's)" >&2; exit 1; }
    while IFS= read -r f; do
        case "$f" in /*) ;; *) echo "$me: $m: not an absolute path: $f" >&2; exit 1 ;; esac
        [ "$f" = "$DATADIR/nri-rs/installed-files" ] && continue
        rm -f "$DESTDIR$f"
        n=$((n + 1))
    done <"$m"
    rm -f "$m"
    # nri-rs's own directories, deepest first, when nothing else is in them.
    for d in "$DESTDIR$DATADIR"/nri-rs/go/adaptation/_before_v* "$DESTDIR$DATADIR/nri-rs/go/adaptation" \
        "$DESTDIR$DATADIR/nri-rs/go" "$DESTDIR$DATADIR/nri-rs"; do
        [ -d "$d" ] && rmdir --ignore-fail-on-non-empty "$d"
    done
    echo "$me: removed $n files under $DESTDIR$PREFIX"
}

case "${1:-}" in
install) do_install ;;
uninstall) do_uninstall ;;
pc) write_pc "${2:?}" "${3:?}" "${4:?}" ;;
*)
    echo "usage: install.sh install | uninstall | pc PREFIX LIBDIR INCLUDEDIR" >&2
    exit 2
    ;;
esac
