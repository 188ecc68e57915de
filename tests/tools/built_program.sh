# shellcheck shell=sh
# Sourced by the test scripts that run programs of this build (vh-run, vh-bench).
# built_program PROGRAM DIR prints a command that runs PROGRAM on this machine: PROGRAM itself, or
# in a cross build (meson test puts the cross file's exe_wrapper, e.g. qemu-aarch64, in
# MESON_EXE_WRAPPER: scripts/check-aarch64.sh) a small script in DIR that runs it through it.
built_program() {
    if [ -z "${MESON_EXE_WRAPPER:-}" ]; then
        printf '%s\n' "$1"
        return
    fi
    abs=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    shim=$2/$(basename "$1")
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$MESON_EXE_WRAPPER" "$abs" > "$shim"
    chmod +x "$shim"
    printf '%s\n' "$shim"
}
