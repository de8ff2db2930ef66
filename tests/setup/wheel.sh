#!/bin/sh
# `make test-wheel`: gmshim as a pip user gets it. A fresh venv (python3 -m venv, offline), then
#  1. `pip install --no-index .` of this tree (the in-tree backend, nothing downloaded): the
#     installed `python -m gmshim run` runs the demo;
#  2. the wheel of `make wheel`: `gmshim` on the venv's PATH runs the demo and prints the report,
#     finding its own libgmshim.so; the gmshim module's marks reach the log under the preload and
#     are silent no-ops without it.
# The demo is tests/integration/demo_train on the fake CUDA runtime of $BUILD.
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
BUILD=${BUILD:-build}
WHEEL_DIR=${WHEEL_DIR:-$BUILD/dist}
PYTHON=${PYTHON:-python3}
build=$(cd "$BUILD" && pwd)
demo="$build/tests/integration/demo_train"
unset MAKEFLAGS MFLAGS MAKELEVEL GMSHIM_LIBRARY LD_PRELOAD GMSHIM_LOG
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gmshim-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $1" >&2; [ -z "${2:-}" ] || sed 's/^/    /' "$2" | tail -25 >&2; }

wheel=$(ls -t "$WHEEL_DIR"/gmshim-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] && wheel="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")" || { echo "wheel: no gmshim-*.whl in $WHEEL_DIR (make wheel)" >&2; exit 1; }

# The tag is what the binaries need, read with readelf (not the writer's own ELF reader): only
# glibc's libraries, and manylinux_2_N for the newest GLIBC_2.N symbol version either one asks for.
if command -v readelf >/dev/null 2>&1; then
    libs=$(for b in "$build/gmshim" "$build/libgmshim.so"; do readelf -d "$b"; done |
        sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | grep -v -x -e libc.so.6 -e libm.so.6 -e libdl.so.2 \
        -e libpthread.so.0 -e librt.so.1 -e libgcc_s.so.1 -e 'ld-linux-.*' || true)
    newest=$(for b in "$build/gmshim" "$build/libgmshim.so"; do readelf -V "$b"; done |
        grep -o 'GLIBC_2\.[0-9]*' | cut -d. -f2 | sort -n | tail -1)
    [ "${newest:-0}" -ge 17 ] || newest=17
    want="manylinux_2_${newest}_$(uname -m)"
    [ -z "$libs" ] || want="linux_$(uname -m)"
    case $(basename "$wheel") in *"-py3-none-$want.whl") ok ;;
    *) bad "wheel $(basename "$wheel") is not tagged $want (extra libraries: ${libs:-none})" ;; esac
    if unzip -p "$wheel" 'gmshim-*.dist-info/WHEEL' 2>/dev/null | grep -q "^Tag: py3-none-$want\$" ||
            "$PYTHON" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = [f for f in z.namelist() if f.endswith(".dist-info/WHEEL")][0]; sys.exit(0 if ("Tag: py3-none-" + sys.argv[2] + "\n") in z.read(n).decode() else 1)' "$wheel" "$want"; then ok
    else bad "the wheel's WHEEL file does not say Tag: py3-none-$want"; fi
else
    echo "wheel: readelf not found (binutils): the manylinux tag is not checked" >&2
fi

"$PYTHON" -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1 || { bad "python3 -m venv" "$tmp/venv.log"; exit 1; }
vpy="$tmp/venv/bin/python"
mkdir -p "$tmp/run" && cd "$tmp/run" || exit 1

# 1. pip install . (the library and CLI already built in $BUILD: the backend's make reuses them)
if GMSHIM_WHEEL_BUILD="$BUILD" "$vpy" -m pip install -q --no-deps "$root" >"$tmp/pip1.log" 2>&1; then ok
else bad "pip install --no-index ." "$tmp/pip1.log"; fi
FAKECUDA_MEM=1G "$vpy" -m gmshim run -o "$tmp/run/src.gmlog" -- "$demo" >"$tmp/src.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -q "^OOM 1 on device 0" "$tmp/src.out" && [ -s "$tmp/run/src.gmlog" ]; then ok
else bad "python -m gmshim run -- demo_train, installed by pip install . (exit $rc)" "$tmp/src.out"; fi

# 2. the wheel of make wheel, over it
if "$vpy" -m pip install -q --no-deps --force-reinstall "$wheel" >"$tmp/pip2.log" 2>&1; then ok
else bad "pip install $wheel" "$tmp/pip2.log"; fi
PATH="$tmp/venv/bin:$PATH"
if [ "$(command -v gmshim)" = "$tmp/venv/bin/gmshim" ]; then ok
else bad "gmshim on PATH is '$(command -v gmshim)', not the venv's"; fi
lib=$("$vpy" -c 'import gmshim; print(gmshim.library_path())')
case $lib in "$tmp/venv/"*/site-packages/gmshim/_native/libgmshim.so) ok ;;
*) bad "gmshim.library_path() is '$lib'" ;; esac

# The demo's OOM is the one it expects: it exits 0, and so does gmshim run, after the report.
FAKECUDA_MEM=1G gmshim run -o "$tmp/run/demo.gmlog" -- "$demo" >"$tmp/demo.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -q "^== pid .*demo.gmlog" "$tmp/demo.out" && grep -q "^OOM 1 on device 0" "$tmp/demo.out" &&
        grep -q "keep_loss_history" "$tmp/demo.out"; then ok
else bad "gmshim run -- demo_train from the venv (exit $rc)" "$tmp/demo.out"; fi

# The module under the preload: marks in the log, seen by the analyzer.
if python -m gmshim run -o "$tmp/run/py.gmlog" -- \
        python "$root/tests/setup/use_module.py" preloaded "$build/fake/libcudart.so.13" >"$tmp/py.out" 2>&1 &&
        grep -q "use_module: preloaded ok" "$tmp/py.out"; then ok
else bad "use_module.py preloaded under python -m gmshim run" "$tmp/py.out"; fi
gmshim dump "$tmp/run/py.gmlog" >"$tmp/dump.out" 2>&1
for label in "epoch 3" "eval" "eval end"; do
    if grep -q "mark.*\"$label\"" "$tmp/dump.out"; then ok; else bad "mark \"$label\" not in the log" "$tmp/dump.out"; fi
done
if gmshim summary --json "$tmp/run/py.gmlog" >"$tmp/summary.json" 2>&1 &&
        "$vpy" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if "\"marks\": 4" in json.dumps(d) else 1)' \
        "$tmp/summary.json"; then ok
else bad "gmshim summary --json: not 4 marks" "$tmp/summary.json"; fi
if gmshim leaks --at "eval end" "$tmp/run/py.gmlog" >"$tmp/leaks.out" 2>&1 && grep -q 'at mark 3 "eval end"' "$tmp/leaks.out"; then ok
else bad "gmshim leaks --at 'eval end'" "$tmp/leaks.out"; fi

# Without the preload: silent, no log.
if python "$root/tests/setup/use_module.py" absent >"$tmp/absent.out" 2>&1 && [ ! -s "$tmp/absent.out" ] &&
        [ -z "$(ls "$tmp/run" | grep -v -e '^src.gmlog$' -e '^demo.gmlog$' -e '^py.gmlog$')" ]; then ok
else bad "use_module.py absent: failed, printed something or wrote a file" "$tmp/absent.out"; fi

echo "wheel: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
