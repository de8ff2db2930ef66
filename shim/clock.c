/* The shim's clock (common.h, gm_now_ns): CLOCK_MONOTONIC, or the CPU's time-stamp counter scaled
 * to it. The counter is used only where the kernel trusts it for its own clock (current
 * clocksource "tsc": invariant, synchronized across CPUs) and the CPU has rdtscp. Calibration is
 * one pair of readings (counter, CLOCK_MONOTONIC) at start and one GM_CLOCK_CALIBRATE_NS later;
 * until then the clock is clock_gettime. The scale's error is the two pairs' reading error over
 * the interval (about 2e-7 here): times drift from CLOCK_MONOTONIC by well under a millisecond an
 * hour, and never go backwards (one counter for every thread). */
#include "clock.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define GM_CLOCK_CALIBRATE_NS (50u * 1000 * 1000)

gm_tsc_clock_t gm_tsc;
int gm_tsc_on;

enum { CAL_OFF, CAL_WAITING, CAL_BUSY, CAL_DONE };
static int cal_state;
static uint64_t cal_tsc, cal_ns;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
static uint64_t read_tsc(void)
{
    unsigned lo, hi, aux;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
    return (uint64_t)hi << 32 | lo;
}

/* A counter reading and CLOCK_MONOTONIC at the same instant: the tightest of a few tries. */
static void read_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t a = read_tsc(), n = mono_ns(), b = read_tsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
}

static int file_has(const char *path, const char *word, int whole_line)
{
    char buf[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    if (whole_line) {
        size_t len = strlen(word);
        return !strncmp(buf, word, len) && (buf[len] == '\n' || buf[len] == 0);
    }
    for (const char *p = strstr(buf, word); p; p = strstr(p + 1, word)) {
        size_t len = strlen(word);
        if ((p == buf || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\n' || p[len] == 0))
            return 1;
    }
    return 0;
}

int clock_counter_usable(void)
{
    return file_has("/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc", 1) &&
           file_has("/proc/cpuinfo", "rdtscp", 0) && file_has("/proc/cpuinfo", "constant_tsc", 0) &&
           file_has("/proc/cpuinfo", "nonstop_tsc", 0);
}
#else
int clock_counter_usable(void)
{
    return 0;
}
#endif

void clock_init(int counter_allowed)
{
#if defined(__x86_64__)
    if (!counter_allowed || __atomic_load_n(&cal_state, __ATOMIC_ACQUIRE) != CAL_OFF || !clock_counter_usable())
        return;
    read_pair(&cal_tsc, &cal_ns);
    __atomic_store_n(&cal_state, CAL_WAITING, __ATOMIC_RELEASE);
#endif
}

int clock_calibrate_now(void)
{
#if defined(__x86_64__)
    int expect = CAL_WAITING;
    if (!__atomic_compare_exchange_n(&cal_state, &expect, CAL_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return expect == CAL_DONE;
    uint64_t tsc, ns;
    read_pair(&tsc, &ns);
    if (tsc <= cal_tsc || ns <= cal_ns || ns - cal_ns < GM_CLOCK_CALIBRATE_NS / 2) {
        /* The counter did not move with the clock, or too short an interval to scale by. */
        __atomic_store_n(&cal_state, CAL_OFF, __ATOMIC_RELEASE);
        return 0;
    }
    gm_tsc.mult = (uint64_t)(((unsigned __int128)(ns - cal_ns) << 32) / (tsc - cal_tsc));
    gm_tsc.base_tsc = tsc;
    gm_tsc.base_ns = ns;
    __atomic_store_n(&gm_tsc_on, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&cal_state, CAL_DONE, __ATOMIC_RELEASE);
    return 1;
#else
    return 0;
#endif
}

uint64_t clock_slow(void)
{
    uint64_t now = mono_ns();
    /* Signed: a thread that read the clock before clock_init stored cal_ns must not calibrate. */
    if (unlikely(__atomic_load_n(&cal_state, __ATOMIC_ACQUIRE) == CAL_WAITING) &&
        (int64_t)(now - cal_ns) >= (int64_t)GM_CLOCK_CALIBRATE_NS)
        clock_calibrate_now();
    return now;
}

int clock_uses_counter(void)
{
    return __atomic_load_n(&gm_tsc_on, __ATOMIC_ACQUIRE);
}
