#!/bin/sh
# The library's ABI against the committed baseline (libabigail: abidw of the public types, then
# abidiff of the two descriptions). Functions or variables removed or changed (a public struct's
# layout included) fail; functions only added pass. The sized structs may grow at their end (the
# struct_size rule keeps old callers working), but abidiff cannot tell that from a break: such a
# commit refreshes the baseline itself (scripts/abi-baseline.sh). Exit 77 without libabigail.
#   check_abi.sh LIBRARY BASELINE HEADERS_DIR
lib=$1 baseline=$2 headers=$3
command -v abidw >/dev/null 2>&1 && command -v abidiff >/dev/null 2>&1 ||
  { echo "abidw / abidiff not installed (Debian: abigail-tools): skipped"; exit 77; }
current=$(mktemp)
trap 'rm -f "$current"' EXIT
abidw --headers-dir "$headers" --drop-private-types --no-corpus-path --no-comp-dir-path --no-show-locs \
  --out-file "$current" "$lib" || { echo "abidw failed on $lib"; exit 1; }
report=$(abidiff "$baseline" "$current")
rc=$?
echo "$report"
if [ $((rc & 3)) -ne 0 ]; then echo "abidiff could not compare (status $rc)"; exit 1; fi
if echo "$report" | grep -Eq '(^|[^0-9])[1-9][0-9]* (Removed|Changed)'; then
  echo "ABI CHANGE against $baseline: removed or changed functions or variables (see above)"
  exit 1
fi
echo "ABI compatible with the baseline"
exit 0
