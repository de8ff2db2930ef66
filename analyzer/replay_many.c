/* Running replays (replay.h): one configuration to the end, or several at once on threads of
 * their own, each replay on a log that none of them writes. */
#include "replay_run.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

rp_result_t replay_once(const rp_log_t *log, const rp_cfg_t *cfg)
{
    rp_result_t res;
    memset(&res, 0, sizeof res);
    replay_t *r = replay_start(log, cfg);
    if (!r)
        return res;
    r->stop_on_fail = cfg->probe;
    replay_run(r, log->nev);
    res = r->res;
    replay_end(r);
    return res;
}

/* ---- several at once ------------------------------------------------------------------------ */

typedef struct many {
    const rp_log_t *log;
    const rp_cfg_t *cfgs;
    rp_result_t *out;
    size_t n, next, done;
    pthread_mutex_t lock;
    void (*progress)(void *, size_t, size_t);
    void *arg;
} many_t;

static void *many_worker(void *p)
{
    many_t *m = p;
    for (;;) {
        size_t i = __atomic_fetch_add(&m->next, 1, __ATOMIC_RELAXED);
        if (i >= m->n)
            return NULL;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        m->out[i] = replay_once(m->log, &m->cfgs[i]);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        m->out[i].seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        pthread_mutex_lock(&m->lock);
        size_t done = ++m->done;
        if (m->progress)
            m->progress(m->arg, done, m->n);
        pthread_mutex_unlock(&m->lock);
    }
}

void replay_many(const rp_log_t *log, const rp_cfg_t *cfgs, rp_result_t *out, size_t n, unsigned threads,
                 void (*progress)(void *arg, size_t done, size_t n), void *arg)
{
    if (!threads) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus < 1 ? 1 : cpus > 16 ? 16 : (unsigned)cpus;
    }
    if (threads > n)
        threads = (unsigned)n;
    many_t m = {log, cfgs, out, n, 0, 0, PTHREAD_MUTEX_INITIALIZER, progress, arg};
    pthread_t tid[16];
    unsigned started = 0;
    for (unsigned i = 1; i < threads && i < 16; i++)
        if (pthread_create(&tid[started], NULL, many_worker, &m) == 0)
            started++;
    many_worker(&m);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&m.lock);
}
