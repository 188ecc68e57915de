#!/bin/sh
# control_loop's command line (issue 25): --help and -h print the usage on stdout and exit 0 without
# loading anything (they used to be taken for a model folder); an unknown option, a rate or a
# length that is not a number > 0, and a fourth argument exit 2 with the usage.
# usage: control_loop_help.sh CONTROL_LOOP
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# a cross build runs its programs through the exe wrapper (qemu-user: scripts/check-aarch64.sh)
. "$(dirname "$0")/../tests/tools/built_program.sh"
loop=$(built_program "$1" "$work")
fail() { echo "FAILED: $*"; exit 1; }
for h in --help -h; do
    "$loop" "$h" > "$work/out" 2> "$work/err" || fail "$h: exit status $?"
    head -1 "$work/out" | grep -q "^usage: control_loop \[MODEL_DIR\] \[RATE_HZ\] \[SECONDS\]" || fail "$h: $(cat "$work/out")"
    grep -q "MODEL_DIR  a Hugging Face OpenVLA checkpoint folder" "$work/out" || fail "$h: no MODEL_DIR line"
    [ ! -s "$work/err" ] || fail "$h wrote to stderr: $(cat "$work/err")"
done
refused() { # WORDS ARGS...
    words=$1
    shift
    set +e
    "$loop" "$@" > "$work/out" 2> "$work/err"
    rc=$?
    set -e
    [ $rc = 2 ] && grep -q "$words" "$work/err" && grep -q "^usage: control_loop" "$work/err" || fail "$*: $rc $(cat "$work/err")"
    [ ! -s "$work/out" ] || fail "$*: wrote $(cat "$work/out")"
}
refused "unknown option --model" --model x
refused "usage" /nonexistent abc
refused "usage" /nonexistent 5 0
refused "usage" /nonexistent 5 1 extra
echo ok
