#!/bin/sh
# The corruption smoke test: N damaged copies of each fixture log (tests/fuzz/corrupt.c, the same
# copies every run) through every gmshim command that reads logs. Each run must end by itself
# (no signal, no sanitizer report), exit 0, 1 (unreadable) or 2 (damaged), and never exit
# non-zero without saying why in a `gmshim: PATH: byte N: ...` line on stderr. The first failures
# and their logs are kept in SCRATCH/failed.
#
#   corrupt-smoke.sh GMSHIM CORRUPT SCRATCH N FIXTURE...     (JOBS=n: parallel runs, default nproc)
set -u
[ $# -ge 5 ] || { echo "usage: corrupt-smoke.sh GMSHIM CORRUPT SCRATCH N FIXTURE..." >&2; exit 1; }
gmshim=$1 corrupt=$2 scratch=$3 n=$4
shift 4
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
rm -rf "$scratch"
mkdir -p "$scratch/failed" || exit 1
# The commands, one a line; the log goes last.
cat > "$scratch/cmds" <<'EOF'
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
timeline --json
timeline --svg -
timeline --html -
dump
--json dump
EOF

# One job: copies j, j + jobs, j + 2 jobs... of every fixture. Prints its counts: runs failures.
job() {
    j=$1 runs=0 failures=0
    shift
    for fixture in "$@"; do
        base=$(basename "$fixture" .gmlog)
        i=$j
        while [ "$i" -lt "$n" ]; do
            log="$scratch/$base-$i.gmlog" err="$scratch/err.$j"
            kind=$("$corrupt" "$fixture" "$log" "$i") || { echo "corrupt-smoke: corrupt $fixture $i failed" >&2; exit 1; }
            while IFS= read -r cmd; do
                runs=$((runs + 1))
                # shellcheck disable=SC2086 # the command's words split on purpose
                "$gmshim" --no-symbols $cmd "$log" > /dev/null 2> "$err"
                rc=$?
                why=
                if [ "$rc" -ge 128 ]; then
                    why="killed by signal $((rc - 128))"
                elif [ "$rc" -gt 2 ]; then
                    why="exit $rc"
                elif grep -q -e 'Sanitizer' -e 'runtime error:' "$err"; then
                    why="a sanitizer report"
                elif [ "$rc" -ne 0 ] && ! grep -q "^gmshim: $log: byte [0-9]*: ." "$err"; then
                    why="exit $rc without a 'gmshim: $log: byte N: ...' line"
                fi
                if [ -n "$why" ]; then
                    failures=$((failures + 1))
                    if [ "$failures" -le 5 ]; then
                        cp "$log" "$scratch/failed/"
                        echo "corrupt-smoke: $base copy $i ($kind): gmshim $cmd: $why" >&2
                        head -5 "$err" | sed 's/^/    /' >&2
                    fi
                fi
            done < "$scratch/cmds"
            rm -f "$log"
            i=$((i + jobs))
        done
    done
    echo "$runs $failures"
}

j=0
while [ "$j" -lt "$jobs" ]; do
    job "$j" "$@" > "$scratch/counts.$j" &
    j=$((j + 1))
done
wait
runs=0 failures=0
j=0
while [ "$j" -lt "$jobs" ]; do
    read -r r f < "$scratch/counts.$j" || { echo "corrupt-smoke: job $j ended early" >&2; exit 1; }
    runs=$((runs + r)) failures=$((failures + f))
    j=$((j + 1))
done
if [ "$failures" -gt 0 ]; then
    echo "corrupt-smoke: $failures of $runs runs failed; damaged logs in $scratch/failed" >&2
    exit 1
fi
echo "corrupt-smoke: $runs runs on $n damaged copies of each of $# logs: all ended cleanly"
