/* The PyTorch bridge's C side without torch: gmshim_torch_event's records (a fake bridge replays
 * a TraceEntry stream, tests/fixtures/torch_trace.txt: see its header). The loader's decisions
 * are in test_torchload.c; the helpers both share in torchtest.h. */
#include "suites.h"
#include "evlog.h"
#include "init.h"
#include "model.h"
#include "options.h"
#include "reader.h"
#include "stacks.h"
#include "torchev.h"
#include "torchtest.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/torch_trace.txt"

/* One scratch directory per test (temp_dir() makes a new one at each call). */
static char scratch_dir[256];

void new_scratch(void)
{
    snprintf(scratch_dir, sizeof scratch_dir, "%s", temp_dir());
}

const char *scratch(void)
{
    return scratch_dir;
}

void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

void mkdir_p(const char *path)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* A log of this test process (each test runs in its own fork) with sites on. */
const char *open_log(void)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/torch.gmlog", scratch());
    setenv("GMSHIM_LOG", path, 1);
    options_reset();
    evlog_open();
    ck_assert_msg(evlog_enabled(), "the log %s did not open", path);
    stacks_init();
    return path;
}

counts_t read_back(const char *path)
{
    evlog_close(GMLOG_CLOSE_EXIT);
    counts_t c;
    memset(&c, 0, sizeof c);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "cannot read %s back", path);
    rd_rec_t r;
    while (rd_next(&lf, &r)) {
        if (r.type > GMLOG_TYPE_MAX)
            continue;
        c.by_type[r.type]++;
        if (r.type >= GMLOG_T_ALLOC && ((const gmlog_tensor_t *)r.p)->site)
            c.sited[r.type]++;
        if (r.type == GMLOG_T_ALLOC && c.by_type[r.type] == 1)
            memcpy(&c.first_alloc, r.p, sizeof c.first_alloc);
    }
    ck_assert_msg(lf.unknown_records == 0 && !lf.partial, "%llu unknown records, partial %d",
                  (unsigned long long)lf.unknown_records, lf.partial);
    rd_close(&lf);
    return c;
}

/* ---- the entry point ---------------------------------------------------------------------- */

/* Replays the recorded stream; returns the events of each action and the first ALLOC's fields. */
static unsigned replay(const char *path, unsigned per_action[9], gmshim_torch_event_t *first_alloc)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "the fixture %s is missing (run from the repository root)", path);
    char line[256];
    unsigned n = 0;
    while (fgets(line, sizeof line, f)) {
        gmshim_torch_event_t ev;
        memset(&ev, 0, sizeof ev);
        ev.size = sizeof ev;
        if (line[0] == '#' || sscanf(line, "%d %d %llx %llu %llx %u", &ev.action, &ev.device, &ev.addr,
                                     &ev.bytes, &ev.stream, &ev.pool) != 6)
            continue;
        ck_assert_msg(ev.action >= 1 && ev.action <= 8, "fixture action %d", ev.action);
        if (ev.action == GMSHIM_TORCH_ALLOC && !per_action[GMSHIM_TORCH_ALLOC])
            *first_alloc = ev;
        per_action[ev.action]++;
        ck_assert_msg(gmshim_torch_event(&ev) == 0, "event %u (action %d) refused", n, ev.action);
        n++;
    }
    fclose(f);
    return n;
}

START_TEST(test_a_recorded_trace_becomes_one_record_per_event)
{
    const char *log = open_log();
    unsigned per[9] = {0};
    gmshim_torch_event_t first;
    unsigned n = replay(FIXTURE, per, &first);
    ck_assert_msg(n > 100 && per[GMSHIM_TORCH_ALLOC] > 0 && per[GMSHIM_TORCH_SEGMENT_ALLOC] > 0,
                  "the fixture holds %u events, %u allocs, %u segments", n, per[1], per[4]);
    counts_t c = read_back(log);
    for (int a = 1; a <= 8; a++)
        ck_assert_msg(c.by_type[torchev_record_type(a)] == per[a], "action %d: %u events, %u records", a,
                      per[a], c.by_type[torchev_record_type(a)]);
    ck_assert_msg(c.first_alloc.addr == first.addr && c.first_alloc.size == first.bytes &&
                  c.first_alloc.stream == first.stream && c.first_alloc.h.device == first.device,
                  "first alloc: logged %#llx %llu stream %#llx dev %u, replayed %#llx %llu %#llx %d",
                  (unsigned long long)c.first_alloc.addr, (unsigned long long)c.first_alloc.size,
                  (unsigned long long)c.first_alloc.stream, c.first_alloc.h.device, first.addr, first.bytes,
                  first.stream, first.device);
    ck_assert_msg(torchev_count() == n, "counted %llu of %u", (unsigned long long)torchev_count(), n);
}
END_TEST

START_TEST(test_allocations_carry_a_site_and_completed_frees_none)
{
    const char *log = open_log();
    unsigned per[9] = {0};
    gmshim_torch_event_t first;
    replay(FIXTURE, per, &first);
    counts_t c = read_back(log);
    ck_assert_msg(c.sited[GMLOG_T_ALLOC] == per[GMSHIM_TORCH_ALLOC] && c.by_type[GMLOG_SITE] > 0,
                  "%u of %u allocs have a site; %u site records", c.sited[GMLOG_T_ALLOC], per[1],
                  c.by_type[GMLOG_SITE]);
    ck_assert_msg(c.sited[GMLOG_T_FREE_COMPLETED] == 0, "%u completed frees have a site",
                  c.sited[GMLOG_T_FREE_COMPLETED]);
}
END_TEST

START_TEST(test_bad_events_are_refused_and_write_nothing)
{
    const char *log = open_log();
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ck_assert_msg(gmshim_torch_event(NULL) == -1, "NULL accepted");
    ev.action = GMSHIM_TORCH_ALLOC;
    ev.size = 8; /* a caller from before the fields it needs */
    ck_assert_msg(gmshim_torch_event(&ev) == -1, "a too small event accepted");
    ev.size = sizeof ev;
    ev.action = 0;
    ck_assert_msg(gmshim_torch_event(&ev) == -1, "action 0 accepted");
    ev.action = 99; /* a newer bridge's action (SNAPSHOT, USER_DEFINED...) */
    ck_assert_msg(gmshim_torch_event(&ev) == -1, "action 99 accepted");
    counts_t c = read_back(log);
    for (int t = GMLOG_T_ALLOC; t <= GMLOG_T_OOM; t++)
        ck_assert_msg(c.by_type[t] == 0, "type %d: %u records", t, c.by_type[t]);
}
END_TEST

START_TEST(test_without_a_log_events_are_dropped_quietly)
{
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.action = GMSHIM_TORCH_ALLOC;
    ck_assert_msg(gmshim_torch_event(&ev) == -1 && torchev_count() == 0, "recorded with no log");
}
END_TEST

START_TEST(test_a_fork_child_records_nothing)
{
    const char *log = open_log();
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.action = GMSHIM_TORCH_ALLOC;
    int saved = gm_state;
    gm_state = GM_CHILD; /* what fork_child sets: the parent's log is not the child's */
    int rc = gmshim_torch_event(&ev);
    gm_state = saved;
    counts_t c = read_back(log);
    ck_assert_msg(rc == -1 && c.by_type[GMLOG_T_ALLOC] == 0, "a fork child logged (rc %d, %u records)", rc,
                  c.by_type[GMLOG_T_ALLOC]);
}
END_TEST

/* ---- a bounded log: its checkpoints repeat PyTorch's live tensors ---------------------------- */

static void event(int action, unsigned long long addr, unsigned long long bytes, unsigned long long stream)
{
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.action = action;
    ev.device = 0;
    ev.addr = addr;
    ev.bytes = bytes;
    ev.stream = stream;
    ck_assert_msg(gmshim_torch_event(&ev) == 0, "event %d %#llx refused", action, addr);
}

#define TMiB (1ull << 20)
#define KEPT_SEG 0x7f1000000000ull   /* 128 MiB: the tensors kept to the end */
#define CHURN_SEG 0x7f2000000000ull  /* 20 MiB: one tensor allocated and freed, again and again */
#define NKEPT 100

static void __attribute__((noinline)) keep_tensor(unsigned i)
{
    event(GMSHIM_TORCH_ALLOC, KEPT_SEG + i * TMiB, TMiB - 100 * i, 0);
}

/* Before the log wraps: PyTorch's two segments, NKEPT tensors that live to the end (each from
 * keep_tensor), one whose free is requested and never completed (pending: another stream still
 * uses it). Then churn until the log has reused its oldest space several times. */
static void wrapped_torch_log(unsigned long churn)
{
    event(GMSHIM_TORCH_SEGMENT_ALLOC, KEPT_SEG, 128 * TMiB, 0);
    event(GMSHIM_TORCH_SEGMENT_ALLOC, CHURN_SEG, 20 * TMiB, 7);
    for (unsigned i = 0; i < NKEPT; i++)
        keep_tensor(i);
    event(GMSHIM_TORCH_ALLOC, KEPT_SEG + NKEPT * TMiB, 4 * TMiB, 0);
    event(GMSHIM_TORCH_FREE_REQUESTED, KEPT_SEG + NKEPT * TMiB, 4 * TMiB, 0);
    for (unsigned long i = 0; i < churn; i++) {
        unsigned long long a = CHURN_SEG + (i % 16) * TMiB;
        event(GMSHIM_TORCH_ALLOC, a, 65536, 7);
        event(GMSHIM_TORCH_FREE_REQUESTED, a, 65536, 7);
        event(GMSHIM_TORCH_FREE_COMPLETED, a, 65536, 7);
    }
}

START_TEST(test_a_wrapped_log_keeps_the_tensors_allocated_before_the_wrap)
{
    setenv("GMSHIM_LOG_LIMIT", "64M", 1);
    setenv("GMSHIM_STACK_DEPTH", "2", 1);
    checkpoint_set_cut(torchev_cut); /* what init installs, less the pools' cut: no device here */
    const char *log = open_log();
    ck_assert_msg(evlog_bounded(), "GMSHIM_LOG_LIMIT=64M did not bound the log");
    unsigned long churn = 1200000;
    wrapped_torch_log(churn);
    evlog_close(GMLOG_CLOSE_EXIT);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, log) == 0, "cannot read %s back", log);
    ck_assert_msg((lf.hdr.flags & GMLOG_F_WRAPPED) && lf.ckpt.seq >= 1 && lf.torch_cut[0],
                  "the log did not wrap behind a checkpoint with PyTorch's state (flags %#x, seq %llu): the test "
                  "proves nothing", lf.hdr.flags, (unsigned long long)lf.ckpt.seq);
    model_t m;
    model_build(&m, &lf, MODEL_ALL);
    const model_dev_t *d = m.dev[0];
    ck_assert_msg(d && d->torch && d->torch_cut_seen, "device 0 is not read as PyTorch's");
    uint64_t kept = 0;
    for (unsigned i = 0; i < NKEPT; i++)
        kept += ((TMiB - 100 * i) + 511) & ~511ull;
    ck_assert_msg(d->allocated == kept && d->reserved == 148 * TMiB,
                  "allocated %llu (the kept tensors: %llu), reserved %llu (PyTorch's segments: %llu)",
                  (unsigned long long)d->allocated, (unsigned long long)kept, (unsigned long long)d->reserved,
                  (unsigned long long)(148 * TMiB));
    ck_assert_msg(d->torch_pending == 4 * TMiB && model_torch_pending_at(&m, KEPT_SEG + NKEPT * TMiB, NULL),
                  "the pending free is lost: %llu pending", (unsigned long long)d->torch_pending);
    ck_assert_msg(d->torch_allocs == NKEPT + 1 + churn, "%llu tensor allocations, %lu made",
                  (unsigned long long)d->torch_allocs, NKEPT + 1 + churn);
    /* the kept tensors are still known by their site: the leak report names keep_tensor */
    size_t at_site = 0;
    for (size_t i = 1; i < m.nsst; i++)
        if (m.sst[i].live_req >= 90 * TMiB)
            at_site++;
    ck_assert_msg(at_site == 1, "no site holds the kept tensors' bytes (%zu sites)", m.nsst);
    model_free(&m);
    rd_close(&lf);
    /* the memory_viz snapshot of it: the kept tensors and the pending free inside PyTorch's segments */
    char snap[PATH_MAX + 16];
    snprintf(snap, sizeof snap, "%s/s.pickle", scratch());
    const char *exp[] = {build_path("gmshim"), "export", "memory-viz", "-o", snap, log, NULL};
    char *out = NULL;
    int rc = run_program(exp, NULL, 0, &out);
    ck_assert_msg(rc == 0, "export exited %d:\n%s", rc, out);
    free(out);
    const char *chk[] = {"/usr/bin/env", "python3", "tests/export/check_memviz.py", snap, NULL};
    rc = run_program(chk, NULL, 0, &out);
    ck_assert_msg(rc == 0 && strstr(out, "segments 2 reserved 155189248 allocated 104388096 ") &&
                  strstr(out, "pending 4194304 "), "the snapshot of the wrapped log:\n%s", out);
    free(out);
    unlink(snap);
    unlink(log); /* 64 MiB */
}
END_TEST

/* Expandable segments in a bounded log's checkpoint: PyTorch unmaps the free last 20 MiB of a
 * 40 MiB mapped range; the checkpoint's copy holds the 20 MiB that stay mapped, as a mapped range,
 * and reserved says so. */
START_TEST(test_a_checkpoint_keeps_what_stays_mapped_of_an_expandable_segment)
{
    setenv("GMSHIM_LOG_LIMIT", "64M", 1);
    const char *log = open_log();
    ck_assert_msg(evlog_bounded(), "GMSHIM_LOG_LIMIT=64M did not bound the log");
    const unsigned long long base = 0x7f0000000000ull;
    event(GMSHIM_TORCH_SEGMENT_MAP, base, 40 * TMiB, 0);
    event(GMSHIM_TORCH_ALLOC, base, 8 * TMiB, 0);
    event(GMSHIM_TORCH_SEGMENT_UNMAP, base + 20 * TMiB, 20 * TMiB, 0);
    ck_assert_msg(torchev_cut(0) >= 3, "the checkpoint wrote nothing");
    evlog_close(GMLOG_CLOSE_EXIT);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, log) == 0, "cannot read %s back", log);
    lf.raw = 1; /* the checkpoint's records as written (no CHECKPOINT frame around them here) */
    rd_rec_t r;
    unsigned maps = 0;
    uint64_t map_size = 0, cut_reserved = 0;
    while (rd_next(&lf, &r)) {
        if (r.type == GMLOG_T_SEGMENT_MAP && maps++ == 1) /* the first is the event, the second the copy */
            map_size = ((const gmlog_tensor_t *)r.p)->size;
        if (r.type == GMLOG_CUT && (r.flags & GMLOG_CUT_TORCH))
            cut_reserved = ((const gmlog_cut_t *)r.p)->reserved;
    }
    rd_close(&lf);
    ck_assert_msg(maps == 2 && map_size == 20 * TMiB && cut_reserved == 20 * TMiB,
                  "%u mapped ranges, the copy's %llu bytes, the cut's reserved %llu", maps,
                  (unsigned long long)map_size, (unsigned long long)cut_reserved);
}
END_TEST

Suite *torchev_suite(void)
{
    Suite *s = suite_create("torchev");
    TCase *ev = tcase_create("events");
    tcase_add_checked_fixture(ev, new_scratch, NULL);
    tcase_add_test(ev, test_a_recorded_trace_becomes_one_record_per_event);
    tcase_add_test(ev, test_allocations_carry_a_site_and_completed_frees_none);
    tcase_add_test(ev, test_bad_events_are_refused_and_write_nothing);
    tcase_add_test(ev, test_without_a_log_events_are_dropped_quietly);
    tcase_add_test(ev, test_a_fork_child_records_nothing);
    tcase_add_test(ev, test_a_wrapped_log_keeps_the_tensors_allocated_before_the_wrap);
    tcase_add_test(ev, test_a_checkpoint_keeps_what_stays_mapped_of_an_expandable_segment);
    tcase_set_timeout(ev, 120);
    suite_add_tcase(s, ev);
    return s;
}
