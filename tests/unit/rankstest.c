/* Rank logs written with chosen times for the verdict's tests (see rankstest.h). */
#include "rankstest.h"
#include "suites.h"
#include "testlog.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int is_rank_var(const char *kv)
{
    return !strncmp(kv, "RANK=", 5) || !strncmp(kv, "LOCAL_RANK=", 11) || !strncmp(kv, "WORLD_SIZE=", 11) ||
           !strncmp(kv, "SLURM_PROCID=", 13);
}

/* Writes one rank's log under dir (gm-rank<r>-<pid>.gmlog) with the times of spec. */
const char *ranks_test_guests[8];

/* A LEDGER sample of device 0 (NVML's other processes: the spec's guests) at t. */
static void write_guests(tlog_t *b, uint64_t t, const char *guests)
{
    struct {
        gmlog_ledger_t l;
        gmlog_ledger_proc_t p[8];
    } r;
    memset(&r, 0, sizeof r);
    r.l.h.type = GMLOG_LEDGER;
    r.l.h.flags = GMLOG_LEDGER_START;
    r.l.total = 1024 * TLOG_MiB;
    r.l.driver_free = r.l.self_used = GMLOG_UNKNOWN;
    r.l.status = GMLOG_LEDGER_NVML;
    for (const char *g = guests; g && *g && r.l.nprocs < 8;) {
        char *end;
        r.p[r.l.nprocs].pid = (uint32_t)strtoul(g, &end, 10);
        r.p[r.l.nprocs].used = strtoull(end + 1, &end, 10) * TLOG_MiB;
        r.l.others += r.p[r.l.nprocs++].used;
        g = *end ? end + 1 : end;
    }
    tlog_rec(b, &r, sizeof r.l + r.l.nprocs * sizeof r.p[0], t);
}

void ranks_test_write(const char *dir, const spec_t *s, uint32_t pid)
{
    tlog_t b;
    tlog_begin(&b, 0);
    gmlog_file_header_t *h = (gmlog_file_header_t *)b.buf;
    h->pid = pid;
    h->start_realtime_ns = T0 + s->start_ms * MS;
    h->flags = s->end == END_OPEN ? 0 : GMLOG_F_CLOSED;
    h->close_reason = s->end == END_OPEN ? GMLOG_CLOSE_OPEN
                      : s->end == END_SIGNAL ? GMLOG_CLOSE_SIGNAL | s->sig << 8 : GMLOG_CLOSE_EXIT;
    h->end_ns = s->end == END_OPEN ? 0 : s->end_ms * MS;
    tlog_meta(&b, GMLOG_META_HOST, s->host ? s->host : "node0");
    char kv[64];
    if (s->rank >= 0) {
        snprintf(kv, sizeof kv, "RANK=%d", s->rank);
        tlog_meta(&b, GMLOG_META_RANK, kv);
    }
    for (int k = 0; k < 4 && s->meta[k]; k++)
        tlog_meta(&b, is_rank_var(s->meta[k]) ? GMLOG_META_RANK : GMLOG_META_JOB, s->meta[k]);
    tlog_chunk(&b, pid, 0, 0, 0);
    tlog_device(&b, 0, "Test GPU", 1024 * TLOG_MiB);
    tlog_site(&b, 0, 1);
    if (s->rank >= 0 && s->rank < 8 && ranks_test_guests[s->rank])
        write_guests(&b, 1 * MS, ranks_test_guests[s->rank]);
    tlog_segment(&b, 1 * MS, GMLOG_SEGMENT_ALLOC, TLOG_SEG, 16 * TLOG_MiB);
    tlog_alloc(&b, 1 * MS, TLOG_SEG, 16 * TLOG_MiB, 0, 1);
    if (s->oom_ms >= 0)
        tlog_oom(&b, (uint64_t)s->oom_ms * MS, 4096 * TLOG_MiB, 16 * TLOG_MiB, 1);
    tlog_mark(&b, s->last_ms * MS, 1, "step");
    tlog_end_chunk(&b);
    char path[600];
    snprintf(path, sizeof path, "%s/gm-rank%d-%u.gmlog", dir, s->rank, pid);
    ck_assert_msg(tlog_write(&b, path) == 0, "cannot write %s", path);
    tlog_free_buf(&b);
    uint64_t mt = T0 + (s->mtime_ms ? s->mtime_ms : s->start_ms + s->last_ms) * MS;
    struct timespec ts[2] = {{(time_t)(mt / 1000000000u), (long)(mt % 1000000000u)},
                             {(time_t)(mt / 1000000000u), (long)(mt % 1000000000u)}};
    ck_assert_msg(utimensat(AT_FDCWD, path, ts, 0) == 0, "cannot set the time of %s", path);
}

/* gmshim report on the directory: text (the verdict only) or JSON. */
char *ranks_test_report(const char *dir, int json)
{
    const char *argv[] = {build_path("gmshim"), json ? "--json" : "--color=never", "report", dir, NULL};
    const char *env[] = {"TZ=UTC", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 0, &out);
    ck_assert_msg(rc == 0, "gmshim report %s exited %d:\n%s", dir, rc, out);
    if (!json) {
        char *end = strstr(out, "\n== rank");
        if (end)
            *end = 0;
    }
    return out;
}

const char *ranks_test_job(const spec_t *s, int n)
{
    const char *dir = temp_dir();
    for (int i = 0; i < n; i++)
        ranks_test_write(dir, &s[i], 100 + (uint32_t)i);
    return dir;
}
