/* The fence policy (shim/fencepol.c): fences over non-blocking and destroyed streams, one
 * arena's fence covering another's frees, waits outside the arenas' locks, GMSHIM_GPU_ORDER's
 * batches; under the preload, a freed block kept from a kernel still using it, and GPU order
 * with every kind of stream and with a second device. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "slowpath.h"
#include "suites.h"
#include "trim.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

START_TEST(test_fence_covers_a_kernel_on_a_nonblocking_stream)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    fencepol_stream_created(d, s, cudaStreamNonBlocking);
    static int done;
    void *p = alloc_or_fail(2 << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p, 100000), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s, mark_done, &done, 0), cudaSuccess);
    free_ok(p);
    void *q = alloc_or_fail(2 << 20);
    ck_assert_msg(q != p || __atomic_load_n(&done, __ATOMIC_ACQUIRE),
                  "the block came back while the kernel on the non-blocking stream still ran");
    free_ok(q);
}
END_TEST

START_TEST(test_work_of_a_destroyed_stream_is_still_fenced)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    fencepol_stream_created(d, s, cudaStreamNonBlocking);
    static int done;
    void *p = alloc_or_fail(2 << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p, 100000), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s, mark_done, &done, 0), cudaSuccess);
    fencepol_stream_destroyed(d, s);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    free_ok(p);
    void *q = alloc_or_fail(2 << 20);
    ck_assert_msg(q != p || __atomic_load_n(&done, __ATOMIC_ACQUIRE),
                  "the block came back while the destroyed stream's kernel still ran");
    free_ok(q);
}
END_TEST

START_TEST(test_a_fence_recorded_by_one_arena_covers_the_frees_another_counted)
{
    enum { N = 4 };
    d->fence_frees = N;
    ck_assert_int_eq(device_add_arena(d), 1);
    void *p[N], *q[N];
    hit_use_arena(1);
    for (int i = 0; i < N; i++)
        p[i] = alloc_or_fail(4096);
    hit_use_arena(0);
    for (int i = 0; i < N; i++)
        q[i] = alloc_or_fail(4096);
    unsigned long long before = stats().fences;
    hit_use_arena(1);
    for (int i = 0; i < N - 1; i++)
        free_ok(p[i]);
    hit_use_arena(0);
    for (int i = 0; i < N; i++)
        free_ok(q[i]); /* the N-th free records a fence: it covers arena 1's frees too */
    ck_assert_uint_eq(stats().fences, before + 1);
    hit_use_arena(1);
    free_ok(p[N - 1]); /* arena 1 has counted one free since that fence, not N */
    ck_assert_uint_eq(stats().fences, before + 1);
}
END_TEST

static void *wait_in_arena_1(void *arg)
{
    void **block = arg;
    hit_use_arena(1);
    free_ok(*block);                  /* pending behind the long kernel */
    *block = alloc_or_fail(64u << 20); /* it fits best: waits for the kernel's fence */
    return NULL;
}

START_TEST(test_a_wait_for_the_gpu_does_not_hold_up_other_arenas)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    hit_use_arena(1);
    void *big = alloc_or_fail(64u << 20);
    hit_use_arena(0);
    void *small = alloc_or_fail(4096);
    ck_assert_int_eq(fakecuda_launch(0, NULL, NULL, 1000000), cudaSuccess); /* 1 s of GPU work */
    pthread_t th;
    pthread_create(&th, NULL, wait_in_arena_1, &big);
    usleep(100000); /* arena 1's thread is now waiting for the fence */
    free_ok(small);
    double t0 = now_ms();
    void *other = alloc_or_fail(100u << 20); /* a miss: records a fence for `small`, then grows */
    double took = now_ms() - t0;
    pthread_join(th, NULL);
    ck_assert_msg(took < 500, "an allocation in arena 0 took %.0f ms while arena 1 waited", took);
    free_ok(other);
    free_ok(big);
}
END_TEST

/* While a kernel on a non-blocking stream still runs, blocks come back at once (no CPU wait), no
 * fence counts as complete, and fences pile up; once it ends, one poll retires them in a batch. */
START_TEST(test_gpu_order_retires_fences_only_after_the_gpu_and_in_batches)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    fencepol_stream_created(d, s, cudaStreamNonBlocking);
    static int done;
    void *p = alloc_or_fail(4 << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p, 300000), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s, mark_done, &done, 0), cudaSuccess);
    uint64_t done_before = d->fences.done;
    for (int i = 0; i < 3 * GM_FENCE_BATCH; i++) {
        free_ok(p);
        void *q = alloc_or_fail(4 << 20);
        ck_assert_ptr_eq(q, p);
    }
    ck_assert_msg(!__atomic_load_n(&done, __ATOMIC_ACQUIRE), "the kernel ended too soon for the test");
    ck_assert_uint_eq(__atomic_load_n(&d->fences.done, __ATOMIC_ACQUIRE), done_before);
    ck_assert_int_ge(outstanding(), 3 * GM_FENCE_BATCH);
    ck_assert_uint_eq(stats().fence_waits, 0);
    fakecuda_drain();
    free_ok(p);
    p = alloc_or_fail(4 << 20);
    ck_assert_int_le(outstanding(), 2);
    free_ok(p);
}
END_TEST

/* With the GPU idle, the fences of a long run of reuses stay few: their events are recycled. */
START_TEST(test_gpu_order_keeps_few_fences_outstanding)
{
    void *p = alloc_or_fail(4 << 20);
    for (int i = 0; i < 1000; i++) {
        free_ok(p);
        p = alloc_or_fail(4 << 20);
    }
    ck_assert_uint_ge(stats().fences, 1000);
    /* The fake GPU's thread can lag behind on a loaded machine (it did under ASan): once it has
     * caught up, one batch of reuses retires every fence before it. */
    fakecuda_drain();
    for (int i = 0; i < GM_FENCE_BATCH; i++) {
        free_ok(p);
        p = alloc_or_fail(4 << 20);
    }
    ck_assert_int_le(outstanding(), 2 * GM_FENCE_BATCH);
    ck_assert_uint_eq(stats().fence_waits, 0);
    free_ok(p);
}
END_TEST

/* Records a fence as an allocation in need would (arena lock held, device current); returns the
 * events it recorded. */
static int issue_a_fence(void)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    gm_ctx_t c;
    devctx_enter(d, &c);
    ck_assert_int_eq(fencepol_issue(a, GMLOG_FENCE_BY_NEED), 0);
    devctx_leave(&c);
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_lock(&d->fence_lock);
    int events = fence_newest_events(&d->fences);
    pthread_mutex_unlock(&d->fence_lock);
    return events;
}

/* A fence records an event only on the streams whose work has not all completed (and always on
 * the legacy stream): PyTorch's pool of 32 streams mostly sits idle. */
START_TEST(test_a_fence_records_no_event_on_an_idle_stream)
{
    cudaStream_t s[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking), cudaSuccess);
        fencepol_stream_created(d, s[i], cudaStreamNonBlocking);
    }
    static int done;
    void *p = alloc_or_fail(2 << 20);
    ck_assert_int_eq(fakecuda_launch(s[1], late_write, p, 100000), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s[1], mark_done, &done, 0), cudaSuccess);
    free_ok(p);
    int events = issue_a_fence();
    ck_assert_msg(!__atomic_load_n(&done, __ATOMIC_ACQUIRE), "the kernel ended too soon for the test");
    ck_assert_msg(events == 2, "a fence over 1 busy and 2 idle streams recorded %d events", events);
    void *q = alloc_or_fail(2 << 20);
    ck_assert_msg(q != p || __atomic_load_n(&done, __ATOMIC_ACQUIRE),
                  "the block came back while the kernel on the busy stream still ran");
    free_ok(q);
    fakecuda_drain();
    for (int i = 0; i < 3; i++) {
        fencepol_stream_destroyed(d, s[i]);
        ck_assert_int_eq(cudaStreamDestroy(s[i]), cudaSuccess);
    }
}
END_TEST

/* Under GPU order a fence asks no stream whether it is idle (its waits keep them all busy): an
 * event on the legacy stream and on each stream, and one after the legacy stream's waits that
 * answers for the fence. */
START_TEST(test_a_gpu_order_fence_asks_no_stream_whether_it_is_idle)
{
    cudaStream_t s[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking), cudaSuccess);
        fencepol_stream_created(d, s[i], cudaStreamNonBlocking);
    }
    fakecuda_drain();
    struct fakecuda_stats before, after;
    fakecuda_get_stats(0, &before);
    int events = issue_a_fence();
    fakecuda_get_stats(0, &after);
    ck_assert_uint_eq(after.stream_queries - before.stream_queries, 0);
    ck_assert_int_eq(events, 1 + 3 + 1);
    /* the legacy stream waits for the 3 streams' events, each stream for the legacy stream */
    ck_assert_uint_eq(after.stream_waits - before.stream_waits, 3 + 3);
    fakecuda_drain();
    for (int i = 0; i < 3; i++) {
        fencepol_stream_destroyed(d, s[i]);
        ck_assert_int_eq(cudaStreamDestroy(s[i]), cudaSuccess);
    }
}
END_TEST

/* GMSHIM_FENCE_SHARE as the quiet time after a fence, in hundredths of its cost: a share above
 * half still limits (a fence may take 60 % of the time: 0.66 of its cost after it). */
START_TEST(test_every_fence_share_below_100_limits_the_fences)
{
    ck_assert_uint_eq(fencepol_gap_of_share(1), 9900);
    ck_assert_uint_eq(fencepol_gap_of_share(10), 900);
    ck_assert_uint_eq(fencepol_gap_of_share(50), 100);
    ck_assert_uint_eq(fencepol_gap_of_share(60), 66);
    ck_assert_uint_eq(fencepol_gap_of_share(99), 1);
    ck_assert_uint_eq(fencepol_gap_of_share(100), 0);
    ck_assert_uint_eq(fencepol_gap_of_share(0), 0);
    ck_assert_uint_eq(d->fence_gap, 9900); /* the default, 1 % */
}
END_TEST

/* GMSHIM_FENCE_SHARE: after a fence, the frees' own fences wait for many times its cost; a miss
 * still records one at once and reuses what it covers instead of growing. */
START_TEST(test_periodic_fences_keep_to_their_share_of_the_time)
{
    d->fence_frees = 1;
    d->fence_gap = 0; /* no limit: every free records a fence */
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc_or_fail(4096);
    unsigned long long before = stats().fences;
    free_ok(p[0]);
    free_ok(p[1]);
    ck_assert_uint_eq(stats().fences, before + 2);
    d->fence_gap = 1000000000u; /* seconds after any fence */
    free_ok(p[2]);              /* the fence that starts the quiet time */
    free_ok(p[3]);
    ck_assert_uint_eq(stats().fences, before + 3);
    void *big = alloc_or_fail(64u << 20); /* a miss: it fences p[3] on the way */
    unsigned long long grown = stats().driver_mallocs, fences = stats().fences;
    free_ok(big);
    ck_assert_uint_eq(stats().fences, fences); /* still quiet */
    void *again = alloc_or_fail(64u << 20);    /* a miss: its own fence, then the same block */
    ck_assert_uint_eq(stats().fences, fences + 1);
    ck_assert_ptr_eq(again, big);
    ck_assert_uint_eq(stats().driver_mallocs, grown);
    free_ok(again);
}
END_TEST

/* While a device is quiet after a fence, the frees do not each read the clock: one found too soon
 * asks again 16 frees later; a free that alone fills the open set asks at once. */
START_TEST(test_a_quiet_device_is_asked_again_only_every_16_frees)
{
    d->fence_frees = 1;
    d->fence_gap = 1000000000u;
    enum { N = 40 };
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = alloc_or_fail(4096);
    void *big = alloc_or_fail(64u << 20);
    free_ok(p[0]); /* a fence, and the quiet time after it */
    unsigned long long fences = stats().fences;
    free_ok(p[1]); /* too soon: asks again 16 frees later */
    __atomic_store_n(&d->fence_quiet_ns, 0, __ATOMIC_RELAXED); /* the quiet time is over */
    for (int i = 2; i <= 16; i++)
        free_ok(p[i]);
    ck_assert_uint_eq(stats().fences, fences); /* the clock was not asked */
    free_ok(p[17]); /* the 17th free since the fence: asked, no longer quiet */
    ck_assert_uint_eq(stats().fences, fences + 1);
    free_ok(p[18]); /* quiet again after that fence */
    __atomic_store_n(&d->fence_quiet_ns, 0, __ATOMIC_RELAXED);
    free_ok(p[19]);
    ck_assert_uint_eq(stats().fences, fences + 1);
    free_ok(big); /* fills the open set alone: asked at once */
    ck_assert_uint_eq(stats().fences, fences + 2);
    for (int i = 20; i < N; i++)
        free_ok(p[i]);
}
END_TEST

/* Frees a periodic fence skipped are fenced by the trimmer's next pass, so idle memory still goes
 * back to the driver. */
START_TEST(test_the_trimmer_fences_frees_left_open)
{
    d->fence_frees = 1;
    d->fence_gap = 1000000000u;
    void *small = alloc_or_fail(4096);
    void *big = alloc_or_fail(64u << 20);
    free_ok(small); /* a fence, and the quiet time after it */
    free_ok(big);
    ck_assert(fencepol_open_set_waiting(d->arenas[0]));
    unsigned long long fences = stats().fences, released = stats().driver_frees;
    slowpath_trim(d, 0);
    ck_assert_uint_eq(stats().fences, fences + 1);
    ck_assert(!fencepol_open_set_waiting(d->arenas[0]));
    fakecuda_drain();
    slowpath_trim(d, 0);
    ck_assert_uint_gt(stats().driver_frees, released);
}
END_TEST

START_TEST(test_freed_block_waits_for_the_kernel_still_using_it)
{
    RUN_OK("tests/integration/reuse_order", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_trusting_stream_order_shows_the_hazard)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_TRUST_STREAM_ORDER=1", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/reuse_order", env, "3", &out);
    ck_assert_msg(rc != 0 && strstr(out, "corrupted"),
                  "without gmshim's ordering the late kernel write must corrupt the new block; "
                  "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* GPU order: the freed block comes back at once and the new owner's stream waits on the GPU,
 * whatever kind of stream the old and new owners use. `setting`: the environment that asks for it
 * (GMSHIM_GPU_ORDER=1, or GMSHIM_TORCH=own and its default); `devices`: the program's use of two
 * visible devices (gpu_order.c), "" for one device visible; `warning`: what stderr must say once,
 * `key` a part of it that names the setting (NULL warning: stderr does not name it). */
static void gpu_order_run(const char *setting, const char *streams, const char *expect, const char *devices,
                          const char *key, const char *warning)
{
    const char *env[] = {"FAKECUDA_MEM=1G", setting, "GMSHIM_LOG=off",
                         *devices ? "FAKECUDA_DEVICES=2" : "FAKECUDA_DEVICES=1", NULL, NULL};
    if (!strcmp(setting, "GMSHIM_GPU_ORDER=0"))
        env[4] = "GMSHIM_TORCH=own";
    char path[4096];
    snprintf(path, sizeof path, "%s", build_path("tests/integration/gpu_order"));
    const char *argv[] = {path, streams, expect, *devices ? devices : NULL, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "gpu_order %s %s %s (%s) exited %d:\n%s", streams, expect, devices, setting, rc, out);
    const char *said = strstr(out, key);
    if (warning) {
        ck_assert_msg(said && strstr(out, warning), "gpu_order %s %s %s (%s): no warning '%s':\n%s", streams, expect,
                      devices, setting, warning, out);
        ck_assert_msg(!strstr(said + 1, key), "gpu_order %s (%s): said more than once:\n%s", devices, setting, out);
    } else {
        ck_assert_msg(!said, "gpu_order %s %s %s (%s): unexpected warning:\n%s", streams, expect, devices, setting,
                      out);
    }
    free(out);
}

static void gpu_order_on(const char *streams, const char *expect, const char *devices, const char *warning)
{
    gpu_order_run("GMSHIM_GPU_ORDER=1", streams, expect, devices, "GMSHIM_GPU_ORDER=1", warning);
}

static void own_mode(const char *streams, const char *expect, const char *devices, const char *warning)
{
    gpu_order_run("GMSHIM_TORCH=own", streams, expect, devices, "GMSHIM_TORCH=own", warning);
}

START_TEST(test_gpu_order_new_owner_on_another_nonblocking_stream)
{
    gpu_order_on("nb:nb2", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_a_blocking_stream)
{
    gpu_order_on("nb:blocking", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_the_legacy_stream)
{
    gpu_order_on("nb:legacy", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_the_per_thread_stream)
{
    gpu_order_on("nb:perthread", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_a_stream_created_after_the_allocation)
{
    gpu_order_on("nb:later", "ordered", "", NULL);
    gpu_order_on("blocking:later", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_old_owner_on_the_legacy_or_a_blocking_stream)
{
    gpu_order_on("legacy:nb2", "ordered", "", NULL);
    gpu_order_on("blocking:nb2", "ordered", "", NULL);
}
END_TEST

/* Two devices visible, one in use (a torchrun rank sees every GPU): GPU order applies there. */
START_TEST(test_gpu_order_applies_when_two_devices_are_visible_and_one_is_used)
{
    gpu_order_on("nb:nb2", "ordered", "dev0", NULL);
    gpu_order_on("nb:nb2", "ordered", "dev1", NULL);
}
END_TEST

/* Both devices in use before the first allocation: it does not apply, and says so once. */
START_TEST(test_gpu_order_waits_on_the_cpu_when_two_devices_are_in_use)
{
    gpu_order_on("nb:nb2", "waited", "both", "does not apply to device 0: the process uses more than one device");
}
END_TEST

/* A second device comes into use right after a block was handed out under GPU order, and its
 * stream writes the block: that write must come after the old owner's late kernel (the switch
 * waits for the first device's ordered fences); later reuse waits on the CPU. */
START_TEST(test_gpu_order_stops_and_waits_when_a_second_device_comes_into_use)
{
    gpu_order_on("nb:nb2", "switched", "peer", "stops applying: the process uses a second device besides device 0");
}
END_TEST

/* GMSHIM_TORCH=own orders freed memory on the GPU by default (GMSHIM_GPU_ORDER=auto). */
START_TEST(test_own_mode_orders_freed_memory_on_the_gpu_by_default)
{
    own_mode("nb:nb2", "ordered", "", NULL);
    own_mode("legacy:later", "ordered", "", NULL);
    own_mode("nb:nb2", "ordered", "dev1", NULL);
}
END_TEST

START_TEST(test_gpu_order_0_keeps_own_mode_waiting_on_the_cpu)
{
    gpu_order_run("GMSHIM_GPU_ORDER=0", "nb:nb2", "waited", "", "GMSHIM_GPU_ORDER", NULL);
}
END_TEST

/* Streams made through the driver below the runtime (by symbol, from dlsym on the driver's handle
 * as a static runtime does, through cuGetProcAddress of either version) are made to wait too:
 * without that, every trial reads the late kernel's write. */
START_TEST(test_streams_made_through_the_driver_are_ordered)
{
    static const char *const kinds[] = {"nb:drv", "nb:drvdlsym", "nb:drvproc", "nb:drvproc2"};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        own_mode(kinds[i], "ordered", "", NULL);
        gpu_order_on(kinds[i], "ordered", "", NULL);
    }
}
END_TEST

/* A stream gmshim's fences cannot cover (another context's, a green context's): own mode goes
 * back to waiting on the CPU and says so once. */
START_TEST(test_own_mode_waits_on_the_cpu_once_a_stream_cannot_be_ordered)
{
    own_mode("nb:private", "waited", "", "a stream was created in a context other than its device's primary one");
    own_mode("nb:green", "waited", "", "a stream of a green context was created");
}
END_TEST

START_TEST(test_own_mode_waits_on_the_cpu_when_two_devices_are_in_use)
{
    own_mode("nb:nb2", "waited", "both", "does not apply to device 0: the process uses more than one device");
    own_mode("nb:nb2", "switched", "peer", "stops applying: the process uses a second device besides device 0");
}
END_TEST

Suite *fencepol_suite(void)
{
    Suite *s = suite_create("fencepol");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_fence_covers_a_kernel_on_a_nonblocking_stream);
    tcase_add_test(tc, test_work_of_a_destroyed_stream_is_still_fenced);
    tcase_add_test(tc, test_a_fence_recorded_by_one_arena_covers_the_frees_another_counted);
    tcase_add_test(tc, test_a_wait_for_the_gpu_does_not_hold_up_other_arenas);
    tcase_add_test(tc, test_a_fence_records_no_event_on_an_idle_stream);
    tcase_add_test(tc, test_every_fence_share_below_100_limits_the_fences);
    tcase_add_test(tc, test_periodic_fences_keep_to_their_share_of_the_time);
    tcase_add_test(tc, test_a_quiet_device_is_asked_again_only_every_16_frees);
    tcase_add_test(tc, test_the_trimmer_fences_frees_left_open);
    suite_add_tcase(s, tc);
    tc = tcase_create("GPU order");
    tcase_add_checked_fixture(tc, setup_gpu_order, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_gpu_order_retires_fences_only_after_the_gpu_and_in_batches);
    tcase_add_test(tc, test_gpu_order_keeps_few_fences_outstanding);
    tcase_add_test(tc, test_a_gpu_order_fence_asks_no_stream_whether_it_is_idle);
    suite_add_tcase(s, tc);
    tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_freed_block_waits_for_the_kernel_still_using_it);
    tcase_add_test(tc, test_own_mode_orders_freed_memory_on_the_gpu_by_default);
    tcase_add_test(tc, test_gpu_order_0_keeps_own_mode_waiting_on_the_cpu);
    tcase_add_test(tc, test_streams_made_through_the_driver_are_ordered);
    tcase_add_test(tc, test_own_mode_waits_on_the_cpu_once_a_stream_cannot_be_ordered);
    tcase_add_test(tc, test_own_mode_waits_on_the_cpu_when_two_devices_are_in_use);
    tcase_add_test(tc, test_trusting_stream_order_shows_the_hazard);
    tcase_add_test(tc, test_gpu_order_new_owner_on_another_nonblocking_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_a_blocking_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_the_legacy_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_the_per_thread_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_a_stream_created_after_the_allocation);
    tcase_add_test(tc, test_gpu_order_old_owner_on_the_legacy_or_a_blocking_stream);
    tcase_add_test(tc, test_gpu_order_applies_when_two_devices_are_visible_and_one_is_used);
    tcase_add_test(tc, test_gpu_order_waits_on_the_cpu_when_two_devices_are_in_use);
    tcase_add_test(tc, test_gpu_order_stops_and_waits_when_a_second_device_comes_into_use);
    suite_add_tcase(s, tc);
    return s;
}
