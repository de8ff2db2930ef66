/* Formatting for the text reports. Units are binary (KiB, MiB, GiB) like the rest of gmshim;
 * colour codes are emitted only when rep_color is set by the CLI's --color logic. */
#include "output.h"

#include <stdarg.h>

int rep_color;

const char *rep_bytes(uint64_t bytes, char buf[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
    return buf;
}

const char *rep_dur(uint64_t ns, char buf[32])
{
    double v = (double)ns;
    if (ns < 1000)
        snprintf(buf, 32, "%llu ns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(buf, 32, "%.3g us", v / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, 32, "%.3g ms", v / 1e6);
    else if (ns < 1000000000000ull)
        snprintf(buf, 32, "%.3g s", v / 1e9);
    else if (ns < 3600000000000ull * 2)
        snprintf(buf, 32, "%.0f s", v / 1e9);
    else
        snprintf(buf, 32, "%.1f h", v / 3.6e12);
    return buf;
}

const char *rep_time(uint64_t ns, char buf[32])
{
    snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
    return buf;
}

const char *rep_pct(uint64_t part, uint64_t whole, char buf[16])
{
    if (!whole)
        snprintf(buf, 16, "-");
    else
        snprintf(buf, 16, "%.1f%%", 100.0 * (double)part / (double)whole);
    return buf;
}

const char *rep_count(uint64_t n, char buf[32])
{
    char tmp[32];
    int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)n);
    int o = 0;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

const char *rep_bold(void) { return rep_color ? "\033[1m" : ""; }
const char *rep_red(void) { return rep_color ? "\033[31m" : ""; }
const char *rep_yellow(void) { return rep_color ? "\033[33m" : ""; }
const char *rep_green(void) { return rep_color ? "\033[32m" : ""; }
const char *rep_dim(void) { return rep_color ? "\033[2m" : ""; }
const char *rep_reset(void) { return rep_color ? "\033[0m" : ""; }

void rep_heading(FILE *f, const char *fmt, ...)
{
    va_list ap;
    fputs(rep_bold(), f);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputs(rep_reset(), f);
    fputc('\n', f);
}
