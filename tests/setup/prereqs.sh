#!/bin/sh
# `make test-prereqs`: a missing build prerequisite stops `make` (and `make -n`) before any
# compile, with one line naming it, and a non-zero exit. Each case runs make in a scratch BUILD
# with one prerequisite taken away: CUDA_HOME at an empty folder, a compiler that sees no
# /usr/include (no uthash.h), a pkg-config that does not exist, one that knows no Check.
set -u
cd "$(dirname "$0")/../.."
unset MAKEFLAGS MFLAGS MAKELEVEL
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gmshim-prereqs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/empty"
pass=0 fail=0

# expect NAME PATTERN MAKE-ARGS...: make exits non-zero, prints exactly one "gmshim: " line, which
# matches PATTERN, and compiled nothing.
expect() {
    name=$1 pat=$2; shift 2
    make --no-print-directory BUILD="$tmp/b" "$@" >"$tmp/out" 2>&1
    rc=$?
    lines=$(grep -c '^gmshim: ' "$tmp/out")
    objs=$(find "$tmp/b" -name '*.o' 2>/dev/null | wc -l)
    if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^gmshim: .*$pat" "$tmp/out" && [ "$objs" -eq 0 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $name: exit $rc, $lines 'gmshim:' lines (want 1 matching '$pat'), $objs objects built; make $*:" >&2
        sed 's/^/    /' "$tmp/out" | head -20 >&2
    fi
    rm -rf "$tmp/b"
}

expect "make -n, no CUDA headers" "CUDA_HOME" -n all CUDA_HOME="$tmp/empty"
expect "make, no CUDA headers" "$tmp/empty/include/cuda_runtime_api.h" all CUDA_HOME="$tmp/empty"
expect "make -n, no uthash" "uthash.h.*uthash-dev" -n all CC="cc --sysroot=$tmp/empty"
expect "make, no uthash" "uthash-dev" all CC="cc --sysroot=$tmp/empty"
printf '#!/bin/sh\nexit 1\n' >"$tmp/pkg-config-knows-nothing"
chmod +x "$tmp/pkg-config-knows-nothing"
expect "make -n, no pkg-config" "pkg-config" -n "$tmp/b/tests/check_gmshim" PKG_CONFIG="$tmp/empty/pkg-config"
expect "make -n, no Check" "Check library.*apt-get install check" -n "$tmp/b/tests/check_gmshim" \
    PKG_CONFIG="$tmp/pkg-config-knows-nothing"
# Plain make needs no Check and no pkg-config.
if make --no-print-directory -n BUILD="$tmp/b" all PKG_CONFIG="$tmp/empty/pkg-config" >"$tmp/out" 2>&1 &&
        ! grep -q '^gmshim: ' "$tmp/out"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL make -n all asked for the test prerequisites:" >&2; head -5 "$tmp/out" >&2
fi
echo "prereqs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
