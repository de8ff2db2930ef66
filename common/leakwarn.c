/* The early-warning rule (leakwarn.h): the shim's GMSHIM_WARN and `gmshim top` decide and word a
 * suspected leak here, so that the two never disagree. Nothing here allocates or locks. */
#include "leakwarn.h"

#include <stdio.h>
#include <string.h>

#define WIN (LEAKWARN_RISES + 1)

void leakwarn_step(leakwarn_t *w, uint64_t low, uint64_t t_ns)
{
    if (w->steps >= WIN) {
        memmove(w->low, w->low + 1, (WIN - 1) * sizeof w->low[0]);
        memmove(w->t, w->t + 1, (WIN - 1) * sizeof w->t[0]);
    }
    uint32_t i = w->steps < WIN ? w->steps : WIN - 1;
    w->low[i] = low;
    w->t[i] = t_ns;
    w->steps++;
}

unsigned leakwarn_rising(const leakwarn_t *w)
{
    uint32_t n = w->steps < WIN ? w->steps : WIN;
    unsigned r = 0;
    while (r + 1 < n && w->low[n - 1 - r] > w->low[n - 2 - r])
        r++;
    return r;
}

int leakwarn_check(const leakwarn_t *w, uint64_t capacity, leakwarn_verdict_t *v)
{
    memset(v, 0, sizeof *v);
    if (w->steps < LEAKWARN_WARMUP + WIN || leakwarn_rising(w) < LEAKWARN_RISES)
        return 0;
    uint64_t rise[LEAKWARN_RISES], sum = 0, early = 0, late = 0;
    for (int i = 0; i < LEAKWARN_RISES; i++) {
        rise[i] = w->low[i + 1] - w->low[i];
        sum += rise[i];
        if (i < LEAKWARN_RISES / 2)
            early += rise[i];
        else
            late += rise[i];
    }
    uint64_t mean = sum / LEAKWARN_RISES;
    if (mean < LEAKWARN_MIN_RISE || late * 2 < early)
        return 0;
    for (int i = 0; i < LEAKWARN_RISES; i++)
        if (rise[i] * 4 < mean)
            return 0;
    v->per_step = mean;
    v->floor = w->low[WIN - 1];
    v->steps_left = !capacity ? UINT64_MAX : v->floor >= capacity ? 0 : (capacity - v->floor) / mean;
    if (w->t[WIN - 1] > w->t[0])
        v->step_s = (double)(w->t[WIN - 1] - w->t[0]) / 1e9 / LEAKWARN_RISES;
    v->window_start_t = w->t[0];
    return 1;
}

static const char *leakwarn_bytes(uint64_t n, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)n;
    unsigned u = 0;
    while (x >= 1024 && u + 1 < sizeof unit / sizeof unit[0]) {
        x /= 1024;
        u++;
    }
    if (u)
        snprintf(buf, len, "%.1f %s", x, unit[u]);
    else
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    return buf;
}

static const char *leakwarn_duration(double s, char *buf, size_t len)
{
    if (s < 90)
        snprintf(buf, len, "%.0f s", s < 1 ? 1 : s);
    else if (s < 90 * 60)
        snprintf(buf, len, "%.0f min", s / 60);
    else if (s < 48 * 3600)
        snprintf(buf, len, "%.1f h", s / 3600);
    else
        snprintf(buf, len, "%.0f days", s / 86400);
    return buf;
}

const char *leakwarn_format(char *buf, size_t len, int dev, const leakwarn_verdict_t *v, const char *site)
{
    char b[32], when[64] = "";
    int n = snprintf(buf, len, "leak suspected on device %d: +%s per step at %s", dev,
                     leakwarn_bytes(v->per_step, b, sizeof b), site && *site ? site : "an unknown site");
    if (n < 0 || (size_t)n >= len || v->steps_left == UINT64_MAX)
        return buf;
    if (v->step_s > 0)
        snprintf(when, sizeof when, "~%s ", leakwarn_duration(v->step_s * (double)v->steps_left, b, sizeof b));
    snprintf(buf + n, len - (size_t)n, "; at this rate the device is full in %s(%llu step%s)", when,
             (unsigned long long)v->steps_left, v->steps_left == 1 ? "" : "s");
    return buf;
}
