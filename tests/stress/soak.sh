#!/usr/bin/env bash
# The long stress of a bounded log: 4 threads allocate and free on the fake runtime for SECONDS
# (default 3600) under GMSHIM_LOG_LIMIT (default 1G), one site leaking 1 MiB every 1 000 000
# pairs of thread 0, an OOM at the end. Samples the log's size every 10 s; then checks that the
# log stayed under its bound (one extent of slack), that the writer's resident file memory stayed
# under 160 MiB, and that `gmshim leaks` names the leaking function and `gmshim oom` the OOM.
#   tests/stress/soak.sh [SECONDS] [LIMIT]      (make soak)
set -euo pipefail
B=${BUILD:-build}
SECS=${1:-3600}
LIMIT=${2:-1G}
DIR=$(mktemp -d /tmp/gmshim-soak-XXXXXX)
LOG=$DIR/soak.gmlog
bytes() { numfmt --from=iec "$1"; }
limit_b=$(bytes "$LIMIT")
start=$(date +%s)
FAKECUDA_MEM=64G GMSHIM_LOG="$LOG" GMSHIM_LOG_LIMIT="$LIMIT" SECONDS_TO_RUN="$SECS" THREADS=4 \
    LEAK_EVERY=1000000 LD_PRELOAD="$B/libgmshim.so" "$B/tests/integration/log_bounded" > "$DIR/out.txt" 2>&1 &
pid=$!
max=0
while kill -0 $pid 2>/dev/null; do
    s=$(stat -c %s "$LOG" 2>/dev/null || echo 0)
    [ "$s" -gt "$max" ] && max=$s
    sleep 10
done
wait $pid
rc=$?
end=$(date +%s)
rss=$(sed -n 's/^rss_file_kib //p' "$DIR/out.txt")
"$B/gmshim" summary "$LOG" > "$DIR/summary.txt" 2>&1 || true
"$B/gmshim" leaks "$LOG" > "$DIR/leaks.txt" 2>&1 || true
"$B/gmshim" oom "$LOG" > "$DIR/oom.txt" 2>&1 || true
leak=$(grep -c leak_one "$DIR/leaks.txt" || true)
oom=$(grep -ci "out of memory\|oom" "$DIR/oom.txt" || true)
echo "soak: ${SECS}s (wall $((end - start)) s), exit $rc, log max $max bytes (limit $limit_b), writer RssFile peak ${rss} KiB, leak named: $leak, OOM lines: $oom, files in $DIR"
ok=1
[ "$rc" = 0 ] || ok=0
[ "$max" -le $((limit_b + 16 * 1024 * 1024 + 1024 * 1024)) ] || ok=0
[ -n "$rss" ] && [ "$rss" -lt $((160 * 1024)) ] || ok=0
[ "$leak" -gt 0 ] && [ "$oom" -gt 0 ] || ok=0
[ $ok = 1 ] && echo "soak: PASS" || { echo "soak: FAIL"; exit 1; }
