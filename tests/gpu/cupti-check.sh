#!/usr/bin/env bash
# CUPTI observation on a real GPU: a static-cudart program, JAX and CuPy under injection mode
# (CUDA_INJECTION64_PATH=libgmshim.so), PyTorch under the preload with GMSHIM_CUPTI=1, then the
# cost of both modes as ratios. Prints PASS/FAIL lines; exit status 0 when all passed. Needs
# build/libgmshim.so (and build/gmshim for the leak report) from `make` on the development
# machine; builds the .cu here with nvcc's default (static) cudart. Writes under $OUT.
#
#   tests/gpu/cupti-check.sh                  # from the repository root
#   tests/gpu/cupti-check.sh static torch     # only some: static jax cupy torch cost
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build
LIB=$B/libgmshim.so
CLI=$B/gmshim
OUT=${OUT:-$B/cupti-out}
PY=${PYTHON:-python3}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
SCAN="$PY $ROOT/tests/gpu/cupti_logscan.py"
WANT="${*:-all}"
FAILED=0
mkdir -p "$OUT"
rm -f "$OUT"/*.gmlog
export PYTHONUNBUFFERED=1

want() { [ "$WANT" = all ] || [[ " $WANT " == *" $1 "* ]]; }

# result NAME PASS|FAIL DETAIL
result() {
    printf '%-4s %-40s %s\n' "$2" "$1" "$3" | tee -a "$OUT/cupti-check.txt"
    [ "$2" = PASS ] || FAILED=$((FAILED + 1))
}

# run NAME ENV... -- CMD...: output in $OUT/NAME.out, the log in $OUT/NAME-<pid>.gmlog
run() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env GMSHIM_LOG="$OUT/$name-%p.gmlog" "${envs[@]}" timeout 600 "$@" >"$OUT/$name.out" 2>&1
    local rc=$?
    echo "--- $name (rc $rc): ${envs[*]} $*" >>"$OUT/commands.txt"
    return $rc
}

log_of() { ls -t "$OUT/$1"-*.gmlog 2>/dev/null | head -1; }
scan_of() { local l; l=$(log_of "$1"); [ -n "$l" ] && $SCAN "$l" | tee "$OUT/$1.scan"; }
total() { sed -n "s/.*\b$2=\([0-9]*\).*/\1/p" "$OUT/$1.scan" 2>/dev/null | head -1; }
warned() { grep -h 'gmshim\[' "$OUT/$1.out" | head -3; }
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$OUT/$2.out" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }'; }

: >"$OUT/cupti-check.txt"
[ -f "$LIB" ] || { echo "no $LIB: run make first"; exit 2; }

if want static || want cost; then
    if "$NVCC" -O2 -g -arch=sm_90 "$ROOT/tests/gpu/cupti_static_leak.cu" -o "$OUT/cupti_static_leak" \
        >"$OUT/nvcc.out" 2>&1 && ! readelf -d "$OUT/cupti_static_leak" | grep -q 'NEEDED.*libcudart'; then
        result static_cudart_build PASS "nvcc default: no libcudart.so NEEDED"
    else
        result static_cudart_build FAIL "$(tail -3 "$OUT/nvcc.out")"
    fi
fi

if want static; then
    # The premise: the preload alone sees nothing of a static cudart (not even a first call).
    run static_preload LD_PRELOAD="$LIB" -- "$OUT/cupti_static_leak"
    scan_of static_preload >/dev/null
    pa=$(total static_preload pool_allocs)$(total static_preload pass_allocs)
    result static_invisible_to_preload "$([ -z "$pa" ] && echo PASS || echo FAIL)" \
        "$([ -f "$OUT/static_preload.scan" ] && head -1 "$OUT/static_preload.scan" || echo 'no hooked call, no log')"
    run static_inject CUDA_INJECTION64_PATH="$LIB" -- "$OUT/cupti_static_leak"
    scan_of static_inject
    line=$(grep 'kind=observed library=cupti_static_leak ' "$OUT/static_inject.scan" 2>/dev/null)
    if [[ "$line" == *"live_bytes=201326592"* ]]; then
        result static_leak_192MiB_observed PASS "$line"
    else
        result static_leak_192MiB_observed FAIL "got: ${line:-nothing} $(warned static_inject)"
    fi
    if [ -x "$CLI" ]; then
        "$CLI" leaks "$(log_of static_inject)" >"$OUT/static_inject.leaks" 2>&1
        if grep -q 'cupti_static_leak_here' "$OUT/static_inject.leaks" && grep -q '192 MiB' "$OUT/static_inject.leaks"; then
            result static_leak_names_function PASS "gmshim leaks: 192 MiB at cupti_static_leak_here"
        else
            result static_leak_names_function FAIL "see $OUT/static_inject.leaks: $(grep -m1 MiB "$OUT/static_inject.leaks")"
        fi
    fi
fi

# injection_app NAME ENV... -- CMD...: allocations observed, at least the 192 MiB of arrays the
# script keeps live at once (the peak: the interpreter frees them at exit)
injection_app() {
    local name=$1
    shift
    run "$name" CUDA_INJECTION64_PATH="$LIB" "$@"
    local rc=$?
    scan_of "$name"
    local n peak
    n=$(total "$name" observed_allocs)
    peak=$(total "$name" observed_peak_bytes)
    if [ "$rc" = 0 ] && [ "${n:-0}" -gt 0 ] && [ "${peak:-0}" -ge 201326592 ]; then
        result "${name}_allocations_observed" PASS "$n observed, peak $peak bytes live"
    else
        result "${name}_allocations_observed" FAIL "rc $rc, ${n:-0} observed, peak ${peak:-0}; $(warned "$name") $(tail -2 "$OUT/$name.out")"
    fi
    [ -x "$CLI" ] && "$CLI" summary "$(log_of "$name")" >"$OUT/$name.summary" 2>&1
}

if want jax; then
    injection_app jax XLA_PYTHON_CLIENT_ALLOCATOR=platform -- "$PY" "$ROOT/tests/gpu/cupti_jax.py"
    injection_app jax_default -- "$PY" "$ROOT/tests/gpu/cupti_jax.py"
fi
if want cupy; then
    injection_app cupy -- "$PY" "$ROOT/tests/gpu/cupti_cupy.py"
fi

if want torch; then
    run torch_foreign LD_PRELOAD="$LIB" GMSHIM_CUPTI=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 -- \
        "$PY" "$ROOT/tests/gpu/cupti_torch.py" foreign
    rc=$?
    scan_of torch_foreign
    cublas=$(grep -c 'kind=foreign library=libcublas' "$OUT/torch_foreign.scan" 2>/dev/null)
    if [ "$rc" = 0 ] && [ "${cublas:-0}" -gt 0 ]; then
        result torch_cublas_foreign PASS "$(grep 'kind=foreign library=libcublas' "$OUT/torch_foreign.scan" | tr '\n' ' ')"
    else
        result torch_cublas_foreign FAIL "rc $rc; $(warned torch_foreign) $(tail -2 "$OUT/torch_foreign.out")"
    fi
    echo "     (other foreign libraries: $(grep 'kind=foreign' "$OUT/torch_foreign.scan" | grep -v libcublas | sed 's/kind=foreign //' | tr '\n' ';'))"
    echo "     ($(grep -o 'nccl=.*' "$OUT/torch_foreign.out"))"
    [ -x "$CLI" ] && "$CLI" summary "$(log_of torch_foreign)" >"$OUT/torch_foreign.summary" 2>&1
    pool=$(total torch_foreign pool_allocs)
    result torch_hooks_still_pool "$([ "${pool:-0}" -gt 0 ] && echo PASS || echo FAIL)" "${pool:-0} pooled allocations beside them"
    run torch_inject CUDA_INJECTION64_PATH="$LIB" -- "$PY" "$ROOT/tests/gpu/cupti_torch.py" foreign
    rc=$?
    scan_of torch_inject >/dev/null
    n=$(total torch_inject observed_allocs)
    result torch_injection_observed "$([ "$rc" = 0 ] && [ "${n:-0}" -gt 0 ] && echo PASS || echo FAIL)" \
        "${n:-0} observed (PyTorch's cached segments and the libraries'); $(warned torch_inject)"
fi

if want cost; then
    echo "== cost (medians of 3 where noted; ratios > 1 are slower) =="
    p=() i=()
    for k in 1 2 3; do
        run cost_static_plain -- "$OUT/cupti_static_leak" bench 2000
        p+=("$(field us_per_pair cost_static_plain)")
        run cost_static_inject CUDA_INJECTION64_PATH="$LIB" -- "$OUT/cupti_static_leak" bench 2000
        i+=("$(field us_per_pair cost_static_inject)")
    done
    mp=$(median3 "${p[@]}")
    mi=$(median3 "${i[@]}")
    echo "static cudaMalloc+cudaFree 2 MiB: plain $mp us, injection $mi us: ratio $(ratio "$mi" "$mp")"
    T="$ROOT/tests/gpu/cupti_torch.py"
    run cost_torch_plain -- "$PY" "$T" loop 300
    run cost_torch_inject CUDA_INJECTION64_PATH="$LIB" -- "$PY" "$T" loop 300
    run cost_torch_plain_nc PYTORCH_NO_CUDA_MEMORY_CACHING=1 -- "$PY" "$T" loop 300
    run cost_torch_inject_nc PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDA_INJECTION64_PATH="$LIB" -- "$PY" "$T" loop 300
    run cost_torch_preload_nc PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD="$LIB" -- "$PY" "$T" loop 300
    run cost_torch_cupti_nc PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD="$LIB" GMSHIM_CUPTI=1 -- "$PY" "$T" loop 300
    a=$(field ms_per_step cost_torch_plain); b=$(field ms_per_step cost_torch_inject)
    c=$(field ms_per_step cost_torch_plain_nc); d=$(field ms_per_step cost_torch_inject_nc)
    e=$(field ms_per_step cost_torch_preload_nc); f=$(field ms_per_step cost_torch_cupti_nc)
    echo "torch loop, PyTorch's cache on:  plain $a ms, injection $b ms: ratio $(ratio "$b" "$a")"
    echo "torch loop, no cache:            plain $c ms, injection $d ms: ratio $(ratio "$d" "$c")"
    echo "torch loop, no cache, preload:   without CUPTI $e ms, GMSHIM_CUPTI=1 $f ms: ratio $(ratio "$f" "$e")"
fi

echo "$FAILED failed; details under $OUT"
[ "$FAILED" = 0 ]
