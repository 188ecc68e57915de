#!/bin/sh
# libvlahybrid.a with the shared library's symbol discipline: the core's objects are linked into
# one relocatable object and every hidden symbol made local, so a program linking the archive sees
# only the public API (vh_session_create, ...) and none of the core's internals (vh_plan_*, the
# JSON and image helpers), which could otherwise clash with its own names.
#   static_archive.sh OUT.a CORE.a OBJCOPY AR CC [CC ARGS...]
set -eu
out=$1 core=$2 objcopy=$3 ar=$4
shift 4
obj=$out.o
"$@" -r -nostdlib -o "$obj" -Wl,--whole-archive "$core" -Wl,--no-whole-archive
"$objcopy" --localize-hidden "$obj"
rm -f "$out"
"$ar" rcs "$out" "$obj"
rm -f "$obj"
