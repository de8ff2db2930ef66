#!/bin/sh
# The CLI's output, byte for byte: runs every command of build/gmshim on the fixtures and on
# small generated logs, and compares stdout, stderr and the exit status with the files here.
# `check` (the unit runner's golden suite) fails on the first difference; `update` (`make
# golden-update`) rewrites them, for a change that alters the output on purpose.
#
#   tests/golden/golden.sh check|update [BUILD (default build)]
#
# It writes only under BUILD/golden (its scratch directory) and, with update, tests/golden/.
set -eu
mode=${1:-}
BUILD=${2:-build}
case $mode in check|update) ;; *) echo "usage: $0 check|update [BUILD]" >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GOLD=$ROOT/tests/golden
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
GMSHIM=$BUILD/gmshim
GENLOG=$BUILD/fuzz/genlog
CONFINE=$BUILD/tests/confine.so
for b in "$GMSHIM" "$GENLOG" "$CONFINE"; do
    [ -e "$b" ] || { echo "golden: no $b (make all $CONFINE)" >&2; exit 2; }
done

# The runs see the same world each time: UTC, the C locale, no terminal, no symbol path from the
# caller, the logs by relative names from a scratch directory (their paths are in the output;
# relative module paths recorded in the fixtures resolve to nothing there).
W=$BUILD/golden
rm -rf "$W"
mkdir -p "$W/out"
ln -s "$ROOT/tests/fixtures" "$W/fixtures"
"$GENLOG" "$W/steps.gmlog" 3000 3 steps > /dev/null 2>&1
"$GENLOG" "$W/random.gmlog" 2000 5 random > /dev/null 2>&1
"$GENLOG" "$W/tiny.gmlog" 60 2 random > /dev/null 2>&1
cd "$W"
export TZ=UTC LC_ALL=C
unset GMSHIM_SYMBOL_PATH GMSHIM_ANALYZER_THREADS NO_COLOR || true

# Nothing outside the clone and the build: every run has tests/golden/confine.c preloaded, which
# makes opening any other absolute path fail (a module path recorded in a fixture, a system
# library, a debug file), so each output is what a fresh clone on a new machine prints. A
# sanitizer build's runtime ($GMSHIM_TEST_PRELOAD) must come first.
CONFINED="LD_PRELOAD=${GMSHIM_TEST_PRELOAD:+$GMSHIM_TEST_PRELOAD:}$CONFINE CONFINE_ROOTS=$ROOT:$BUILD"
# shellcheck disable=SC2086 # the assignments split on purpose
probe=$(env $CONFINED "$GMSHIM" summary /bin/sh 2>&1 > /dev/null || true)
case $probe in
*"No such file"*) ;;
*) echo "golden: the confinement to the clone is not in effect (summary /bin/sh said: $probe)" >&2; exit 2 ;;
esac

failed=0
cases=0
# one case: NAME [VAR=VALUE...] ARGS...; stdout, then stderr and the exit status
c() {
    name=$1
    shift
    cases=$((cases + 1))
    rc=0
    # shellcheck disable=SC2086
    env $CONFINED "$@" > "out/$name.stdout" 2> "out/$name.stderr" < /dev/null || rc=$?
    # whatif's JSON holds its measured replay speed: the one figure that differs run to run
    sed -i 's/"events_per_second_per_run":[0-9.e+-]*/"events_per_second_per_run":N/' "out/$name.stdout"
    {
        cat "out/$name.stdout"
        echo "--- stderr"
        cat "out/$name.stderr"
        echo "--- exit $rc"
    } > "out/$name.out"
    if [ "$mode" = update ]; then
        cp "out/$name.out" "$GOLD/$name.out"
    elif ! cmp -s "out/$name.out" "$GOLD/$name.out"; then
        echo "golden: $name: the output differs from tests/golden/$name.out (gmshim $*):" >&2
        diff -u "$GOLD/$name.out" "out/$name.out" 2>&1 | head -40 >&2 || true
        failed=$((failed + 1))
    fi
}
g=$GMSHIM
DEMO=fixtures/demo.gmlog
CUPTI=fixtures/h200_cupti_static_inject.gmlog
TORCH=fixtures/h200_torch_leak_oom.gmlog
SYM="--symbol-path fixtures"

# the command table: usage, help, version, mistakes
c usage "$g"
c help "$g" --help
c help-help "$g" help help
c version "$g" --version
c no-such-command "$g" nosuch
c help-nosuch "$g" help nosuch
for cmd in report summary leaks frag oom whatif diff top timeline dump export run; do
    c "help-$cmd" "$g" help "$cmd"
    c "$cmd-help" "$g" "$cmd" --help
done
c top-once "$g" $SYM top --once $DEMO
c top-once-json "$g" --json top --once steps.gmlog
c leaks-no-log "$g" leaks
c leaks-bad-top "$g" leaks --top x $DEMO
c leaks-top-twice "$g" leaks --top 3 --top 5 $DEMO
c leaks-bad-frames "$g" leaks --frames some $DEMO
c report-unknown-option "$g" report --nosuch $DEMO
c report-bad-color "$g" --color=pink report $DEMO
c timeline-no-output "$g" timeline $DEMO
c timeline-two-outputs "$g" timeline --svg a.svg --html b.html $DEMO
c timeline-json-and-svg "$g" timeline --json --svg a.svg $DEMO
c missing-log "$g" summary no-such.gmlog

# every report on every log, text and JSON
for log in demo cupti torch steps random; do
    case $log in
    demo) f=$DEMO ;; cupti) f=$CUPTI ;; torch) f=$TORCH ;; *) f=$log.gmlog ;;
    esac
    for cmd in report summary leaks frag oom; do
        c "$cmd-$log" "$g" $SYM "$cmd" "$f"
        c "$cmd-$log-json" "$g" $SYM --json "$cmd" "$f"
    done
    [ $log = torch ] || c "timeline-$log-json" "$g" timeline --json "$f"
done
# the same reports read in parallel (forced on small logs): the same figures
for log in torch steps random; do
    case $log in torch) f=$TORCH ;; *) f=$log.gmlog ;; esac
    for cmd in report summary leaks oom; do
        c "$cmd-$log-parallel" GMSHIM_ANALYZER_THREADS=4 "$g" "$cmd" "$f"
    done
    c "report-$log-parallel-json" GMSHIM_ANALYZER_THREADS=4 "$g" --json report "$f"
done
# options
c leaks-demo-at-3 "$g" $SYM leaks --at 3 $DEMO
c leaks-demo-at-missing "$g" $SYM leaks --at 99 $DEMO
c leaks-demo-at-missing-json "$g" $SYM --json leaks --at nosuch $DEMO
c leaks-torch-top-2-depth-3 "$g" leaks --top 2 --depth 3 $TORCH
c leaks-torch-frames-all "$g" leaks --frames all $TORCH
c leaks-torch-top-all "$g" leaks --top 0 --depth 0 $TORCH
c oom-torch-depth-2 "$g" oom --depth 2 $TORCH
c report-demo-no-symbols "$g" --no-symbols report $DEMO
c report-demo-color "$g" $SYM --color=always report $DEMO
c report-demo-top-1 "$g" $SYM report -n1 -d2 $DEMO
# several logs: one section each and the combined line; a job's directory; an unreadable one
c report-three "$g" $SYM report $DEMO $CUPTI steps.gmlog
c report-three-json "$g" $SYM --json report $DEMO $CUPTI steps.gmlog
c summary-three-json "$g" --json summary $DEMO $CUPTI random.gmlog
c report-directory "$g" $SYM report fixtures/
c summary-with-missing "$g" summary $DEMO no-such.gmlog
# dump and the drawings, on the small logs
c dump-demo "$g" dump $DEMO
for log in cupti tiny; do
    case $log in cupti) f=$CUPTI ;; *) f=$log.gmlog ;; esac
    c "dump-$log" "$g" dump "$f"
    c "dump-$log-json" "$g" dump --json "$f"
done
c timeline-demo-html "$g" $SYM timeline --html - $DEMO
# two runs compared: a change and the gate, the same run (no change), a job's directory, mistakes
c diff-demo-torch "$g" $SYM diff --fail-above 10% $DEMO $TORCH
c diff-demo-torch-json "$g" $SYM --json diff --top 3 --fail-above reserved:200G,ooms:0 $DEMO $TORCH
c diff-steps-random "$g" diff steps.gmlog random.gmlog
c diff-steps-same-json "$g" --json diff steps.gmlog steps.gmlog
c diff-directory "$g" $SYM diff --top 2 fixtures/ fixtures/
c diff-one-log "$g" diff $DEMO
c diff-bad-fail-above "$g" diff --fail-above pink:3% $DEMO $DEMO
c diff-missing-log "$g" diff $DEMO no-such.gmlog
# what-if replays of the fixtures
c whatif-demo "$g" $SYM whatif $DEMO
c whatif-not-a-log "$g" whatif fixtures/torch_trace.txt
c whatif-torch-json "$g" --json whatif $TORCH
c whatif-torch-limit "$g" whatif --device-limit 100G $TORCH
# PyTorch's allocator modelled on a keep-mode log: its settings one by one, then the grid
c whatif-keep-frag "$g" $SYM whatif fixtures/h200_scen_frag_keep.gmlog
c whatif-keep-frag-grid "$g" $SYM whatif --grid fixtures/h200_scen_frag_keep.gmlog
c whatif-keep-frag-json "$g" --json whatif fixtures/h200_scen_frag_keep.gmlog
c whatif-climb "$g" $SYM whatif fixtures/h200_scen_weights_own.gmlog
c whatif-planned-replay "$g" --json whatif fixtures/plan_gpu_order.gmlog

if [ "$mode" = update ]; then
    # files of cases no longer run go
    for f in "$GOLD"/*.out; do
        n=$(basename "$f" .out)
        [ -e "out/$n.out" ] || rm -f "$f"
    done
    echo "golden: wrote $cases cases into tests/golden/"
    exit 0
fi
[ "$failed" = 0 ] || { echo "golden: $failed of $cases cases differ; 'make golden-update' rewrites them when the change is meant" >&2; exit 1; }
echo "golden: $cases cases match"
