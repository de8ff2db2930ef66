#!/bin/sh
# The corruption runs: damaged copies of logs (tests/fuzz/corrupt.c: flips, cuts, zeroed ranges,
# swapped or duplicated chunks, bad headers; copy number i is the same bytes every run) through
# every gmshim command that reads logs, on a CLI built with ASan and UBSan. Each run must end by
# itself within RUN_TIMEOUT seconds (no hang, no signal, no sanitizer report) and agree with
# `dump` on the same copy: where dump calls the copy damaged (exit 2), every command exits 2
# (but `leaks --at N`, which reads only up to its mark, may answer 0);
# exit 1 or 2 comes with a `gmshim: PATH: byte N: ...` line on stderr (whatif's 3, nothing
# tried fits, only where dump finds no damage). The first failures
# and their logs are kept in SCRATCH/failed.
#
#   corrupt-smoke.sh GMSHIM CORRUPT SCRATCH N LOG...
#     N copies of each LOG; with SECONDS_LIMIT=s, copies until s seconds have passed (at most N).
#     JOBS=n parallel runs (default nproc), RUN_TIMEOUT=s a run (default 300).
set -u
[ $# -ge 5 ] || { echo "usage: corrupt-smoke.sh GMSHIM CORRUPT SCRATCH N LOG..." >&2; exit 1; }
gmshim=$1 corrupt=$2 scratch=$3 n=$4
shift 4
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
limit=${SECONDS_LIMIT:-0}
run_timeout=${RUN_TIMEOUT:-300}
start=$(date +%s)
# A sanitizer's report must be told from gmshim's own exits: exit codes of their own.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86:detect_leaks=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1:exitcode=87"
rm -rf "$scratch"
mkdir -p "$scratch/failed" || exit 1
# The commands, one a line; the log goes last (@SRC: the undamaged log, for diff's A). dump first:
# its exit status is the reference. diff's exit 1 is its gate, not an error: only with the gate.
cat > "$scratch/cmds" <<'CMDS'
dump
--json dump
summary
--json summary
leaks
leaks --at 2
--json leaks
report
--json report
frag
--json frag
oom
--json oom
whatif
--json whatif
timeline --json
timeline --svg -
timeline --html -
export perfetto -o -
export memory-viz -o -
top --once
--json top --once
diff @SRC
--json diff --fail-above 0 @SRC
CMDS

# One job: copies j, j + jobs, j + 2 jobs... of every log. Prints its counts: copies runs failures.
job() {
    j=$1 copies=0 runs=0 failures=0
    shift
    i=$j
    while [ "$i" -lt "$n" ]; do
        if [ "$limit" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$limit" ]; then
            break
        fi
        for src in "$@"; do
            base=$(basename "$src" .gmlog)
            log="$scratch/$base-$i.gmlog" err="$scratch/err.$j"
            kind=$("$corrupt" "$src" "$log" "$i") || { echo "corrupt-smoke: corrupt $src $i failed" >&2; exit 1; }
            copies=$((copies + 1))
            ref=
            while IFS= read -r cmd; do
                runs=$((runs + 1))
                words=$(printf '%s\n' "$cmd" | sed "s|@SRC|$src|")
                # shellcheck disable=SC2086 # the command's words split on purpose
                timeout -k 10 "$run_timeout" "$gmshim" --no-symbols $words "$log" > /dev/null 2> "$err"
                rc=$?
                [ -n "$ref" ] || ref=$rc
                why=
                if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                    why="no end within $run_timeout s"
                elif [ "$rc" -ge 128 ]; then
                    why="killed by signal $((rc - 128))"
                elif grep -q -e 'Sanitizer' -e 'runtime error:' "$err"; then
                    why="a sanitizer report"
                elif [ "$rc" -gt 2 ] && ! { [ "$rc" -eq 3 ] && [ "$ref" -eq 0 ] && [ "${cmd#*whatif}" != "$cmd" ]; }; then
                    why="exit $rc"
                elif [ "$rc" -eq 1 ] && [ "${cmd#*diff}" != "$cmd" ] && { [ "$ref" -ne 0 ] || [ "${cmd#*fail-above}" = "$cmd" ]; }; then
                    why="diff's gate exit 1 with no gate asked for, or on a copy dump does not read"
                elif [ "$ref" -eq 2 ] && [ "$rc" -ne 2 ] && ! { [ "$rc" -eq 0 ] && [ "${cmd#*--at}" != "$cmd" ]; }; then
                    # (leaks --at reads only up to its mark: damage past it is not its answer's)
                    why="exit $rc where dump calls the log damaged (exit 2)"
                elif [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ] && ! { [ "$rc" -eq 1 ] && [ "${cmd#*diff}" != "$cmd" ]; } &&
                        ! grep -q "^gmshim: $log: byte [0-9]*: ." "$err"; then
                    why="exit $rc without a 'gmshim: $log: byte N: ...' line"
                fi
                if [ -n "$why" ]; then
                    failures=$((failures + 1))
                    if [ "$failures" -le 5 ]; then
                        cp "$log" "$scratch/failed/"
                        echo "corrupt-smoke: $base copy $i ($kind): gmshim $cmd: $why" >&2
                        grep -v '^    #[0-9]' "$err" | head -8 | sed 's/^/    /' >&2
                    fi
                fi
            done < "$scratch/cmds"
            rm -f "$log"
        done
        i=$((i + jobs))
    done
    echo "$copies $runs $failures"
}

j=0
while [ "$j" -lt "$jobs" ]; do
    job "$j" "$@" > "$scratch/counts.$j" &
    j=$((j + 1))
done
wait
copies=0 runs=0 failures=0
j=0
while [ "$j" -lt "$jobs" ]; do
    read -r c r f < "$scratch/counts.$j" || { echo "corrupt-smoke: job $j ended early" >&2; exit 1; }
    copies=$((copies + c)) runs=$((runs + r)) failures=$((failures + f))
    j=$((j + 1))
done
took=$(($(date +%s) - start))
if [ "$failures" -gt 0 ]; then
    echo "corrupt-smoke: $failures of $runs runs failed ($copies damaged copies of $# logs, $took s); damaged logs in $scratch/failed" >&2
    exit 1
fi
echo "corrupt-smoke: $runs runs on $copies damaged copies of $# logs in $took s: all ended cleanly"
