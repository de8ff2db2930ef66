/* `gmshim export` (analyzer/export*.c) and the HTML timeline (analyzer/timeline*.c): the
 * Perfetto trace and the memory_viz pickle of each fixture, read back by Python's json and
 * pickle modules (tests/export/check_*.py: the formats' rules and the viewers' own checks),
 * their figures against what the reports say of the same log; options, windows and usage
 * errors; strings a log may hold that no viewer must choke on. The timeline page in a browser
 * is tested in test_analyzer_timeline.c. */
#include "gmlog.h"
#include "sites.h"
#include "suites.h"
#include "test_analyzer_cli.h"
#include "testlog.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURES "tests/fixtures"
/* The last four kept PyTorch's cache with the bridge: their tensors are the blocks. */
static const char *const fixtures[] = {"demo", "h200_torch_leak_oom", "h200_cupti_static_inject",
                                       "h200_scen_frag_keep", "h200_scen_leak_keep", "h200_scen_transient_keep",
                                       "h200_scen_weights_keep"};
#define NFIX (sizeof fixtures / sizeof fixtures[0])

/* Runs a program with arguments up to NULL: exit status, output in *out. */
static int runv(char **out, const char *prog, const char *const *args)
{
    const char *argv[24] = {prog};
    for (int i = 0; args[i] && i < 22; i++)
        argv[i + 1] = args[i];
    return run_program(argv, NULL, 0, out);
}
#undef gm /* test_analyzer_cli.h's: this file runs gmshim through runv */
#define gm(out, ...) runv(out, build_path("gmshim"), (const char *const[]){__VA_ARGS__, NULL})
#define py(out, ...) runv(out, "/usr/bin/env", (const char *const[]){"python3", __VA_ARGS__, NULL})

static const char *fixture(const char *name)
{
    static char buf[8][256];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], FIXTURES "/%s.gmlog", name);
    return b;
}

static const char *tmpfile_in(const char *dir, const char *name)
{
    static char buf[8][512];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

/* The number after "key": in a JSON text (the first one), or UINT64_MAX. */
static uint64_t json_number(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
}

/* What `gmshim summary --json` says of a log: allocations, OOMs, peak allocated. */
static void summary_of(const char *log, uint64_t *allocs, uint64_t *ooms, uint64_t *peak)
{
    char *out;
    int rc = gm(&out, "summary", "--json", log);
    ck_assert_msg(rc == 0, "summary of %s exited %d:\n%s", log, rc, out);
    const char *dev = strstr(out, "\"devices\"");
    ck_assert_msg(dev != NULL, "no devices in the summary of %s", log);
    *allocs = json_number(dev, "allocs");
    *ooms = json_number(dev, "ooms");
    *peak = json_number(dev, "peak_allocated");
    free(out);
}

START_TEST(test_perfetto_export_of_each_fixture_is_a_trace_with_the_reports_peaks)
{
    const char *dir = temp_dir();
    for (size_t i = 0; i < NFIX; i++) {
        const char *trace = tmpfile_in(dir, "t.json");
        char *out;
        int rc = gm(&out, "export", "perfetto", "-o", trace, fixture(fixtures[i]));
        ck_assert_msg(rc == 0, "export perfetto %s exited %d:\n%s", fixtures[i], rc, out);
        free(out);
        uint64_t allocs, ooms, peak;
        summary_of(fixture(fixtures[i]), &allocs, &ooms, &peak);
        char p[32], n[32];
        snprintf(p, sizeof p, "%" PRIu64, peak);
        snprintf(n, sizeof n, "%" PRIu64, ooms);
        rc = py(&out, "tests/export/check_perfetto.py", trace, "--processes", "1", "--peak-allocated", p, "--ooms", n);
        ck_assert_msg(rc == 0, "the trace of %s does not check (peak %s, %s OOMs):\n%s", fixtures[i], p, n, out);
        free(out);
    }
}
END_TEST

START_TEST(test_perfetto_memory_outside_the_pool_is_a_counter_per_library)
{
    const char *trace = tmpfile_in(temp_dir(), "t.json");
    char *out;
    int rc = gm(&out, "export", "perfetto", "-o", trace, fixture("h200_cupti_static_inject"));
    ck_assert_msg(rc == 0, "export exited %d:\n%s", rc, out);
    free(out);
    rc = py(&out, "tests/export/check_perfetto.py", trace, "--outside");
    ck_assert_msg(rc == 0 && strstr(out, "outside the pool: cupti_static_leak"),
                  "no counter of the static program's own memory:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_perfetto_logs_are_processes_even_with_one_pid)
{
    const char *trace = tmpfile_in(temp_dir(), "t.json");
    char *out;
    /* the same log twice: two processes of one pid (two hosts would give that) stay apart */
    int rc = gm(&out, "export", "perfetto", "-o", trace, fixture("demo"), fixture("demo"), fixture("h200_torch_leak_oom"));
    ck_assert_msg(rc == 0, "export of three logs exited %d:\n%s", rc, out);
    free(out);
    rc = py(&out, "tests/export/check_perfetto.py", trace, "--processes", "3");
    ck_assert_msg(rc == 0, "three logs are not three named processes:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_perfetto_resolution_downsamples_to_bucket_maxima_keeping_the_peak)
{
    const char *dir = temp_dir();
    const char *fine = tmpfile_in(dir, "fine.json"), *coarse = tmpfile_in(dir, "coarse.json");
    char *out, *a, *b;
    int rc = gm(&out, "export", "perfetto", "--resolution", "0", "-o", fine, fixture("h200_torch_leak_oom"));
    ck_assert_msg(rc == 0, "export --resolution 0 exited %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "export", "perfetto", "--resolution=5ms", "-o", coarse, fixture("h200_torch_leak_oom"));
    ck_assert_msg(rc == 0 && strstr(out, "counter resolution 5 ms") && strstr(out, "maximum over its bucket"),
                  "the resolution is not stated (exit %d):\n%s", rc, out);
    free(out);
    uint64_t allocs, ooms, peak;
    summary_of(fixture("h200_torch_leak_oom"), &allocs, &ooms, &peak);
    char p[32];
    snprintf(p, sizeof p, "%" PRIu64, peak);
    ck_assert_msg(py(&a, "tests/export/check_perfetto.py", fine, "--peak-allocated", p) == 0, "fine trace:\n%s", a);
    ck_assert_msg(py(&b, "tests/export/check_perfetto.py", coarse, "--peak-allocated", p, "--resolution-ns", "5000000") == 0,
                  "the 5 ms trace lost the peak or is not downsampled:\n%s", b);
    uint64_t na = 0, nb = 0;
    sscanf(strstr(a, "samples ") + 8, "%" SCNu64, &na);
    sscanf(strstr(b, "samples ") + 8, "%" SCNu64, &nb);
    ck_assert_msg(nb * 4 < na, "5 ms buckets kept %" PRIu64 " of %" PRIu64 " samples", nb, na);
    free(a);
    free(b);
}
END_TEST

/* On a tensor log too: the OOM is PyTorch's (its T_OOM), analysed as the report does. */
START_TEST(test_perfetto_oom_instant_carries_the_cause_the_oom_report_gives)
{
    static const char *const logs[] = {"demo", "h200_scen_frag_keep", "h200_scen_leak_keep"};
    for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) {
        const char *trace = tmpfile_in(temp_dir(), "t.json");
        char *out, *rep;
        int rc = gm(&out, "export", "perfetto", "-o", trace, fixture(logs[i]));
        ck_assert_msg(rc == 0, "export %s exited %d:\n%s", logs[i], rc, out);
        free(out);
        rc = gm(&rep, "oom", "--json", fixture(logs[i]));
        const char *c = strstr(rep, "\"cause\":\"");
        ck_assert_msg(rc == 0 && c, "gmshim oom --json %s gives no cause:\n%s", logs[i], rep);
        char want[64];
        snprintf(want, sizeof want, "%.*s", (int)strcspn(c + 9, "\"") + 10, c);
        FILE *f = fopen(trace, "r");
        static char doc[1 << 20];
        size_t n = f ? fread(doc, 1, sizeof doc - 1, f) : 0;
        if (f)
            fclose(f);
        doc[n] = 0;
        const char *oom = strstr(doc, "\"name\":\"OOM");
        ck_assert_msg(oom && strstr(oom, want) && strstr(oom, "\"request\":") && strstr(oom, "\"evidence\":"),
                      "%s: the OOM instant lacks %s, its request or its evidence", logs[i], want);
        free(rep);
    }
}
END_TEST

START_TEST(test_memviz_export_of_each_fixture_loads_with_pickle_and_replays)
{
    const char *dir = temp_dir();
    for (size_t i = 0; i < NFIX; i++) {
        const char *snap = tmpfile_in(dir, "s.pickle");
        char *out;
        int rc = gm(&out, "export", "memory-viz", "-o", snap, fixture(fixtures[i]));
        ck_assert_msg(rc == 0, "export memory-viz %s exited %d:\n%s", fixtures[i], rc, out);
        free(out);
        uint64_t allocs, ooms, peak;
        summary_of(fixture(fixtures[i]), &allocs, &ooms, &peak);
        char a[32], o[32];
        snprintf(a, sizeof a, "%" PRIu64, allocs);
        snprintf(o, sizeof o, "%" PRIu64, ooms);
        int outside = !strcmp(fixtures[i], "h200_cupti_static_inject");
        rc = outside ? py(&out, "tests/export/check_memviz.py", snap, "--expect-allocs", a, "--expect-oom", o,
                          "--expect-categories")
                     : py(&out, "tests/export/check_memviz.py", snap, "--expect-allocs", a, "--expect-oom", o);
        ck_assert_msg(rc == 0, "the snapshot of %s does not check (%s allocs, %s OOMs):\n%s", fixtures[i], a, o, out);
        ck_assert_msg(!strstr(out, "with_frames 0 "), "the snapshot of %s has no frames:\n%s", fixtures[i], out);
        free(out);
    }
}
END_TEST

START_TEST(test_memviz_frames_are_python_and_native_innermost_first)
{
    const char *snap = tmpfile_in(temp_dir(), "s.pickle");
    char *out;
    int rc = gm(&out, "export", "memory-viz", "-o", snap, fixture("h200_torch_leak_oom"));
    ck_assert_msg(rc == 0, "export exited %d:\n%s", rc, out);
    free(out);
    /* the leaking line of the script is the outermost frame; native frames come before it */
    rc = py(&out, "-c",
            "import pickle,sys\n"
            "s=pickle.load(open(sys.argv[1],'rb'))\n"
            "a=[e for e in s['device_traces'][0] if e['action']=='alloc'][-1]['frames']\n"
            "py=[i for i,f in enumerate(a) if f['filename'].endswith('.py')]\n"
            "assert py and py[-1]==len(a)-1 and py[0]>0, a\n"
            "assert any('.so' in f['filename'] for f in a[:py[0]]), a\n"
            "print(a[-1])\n",
            snap);
    ck_assert_msg(rc == 0 && strstr(out, "torch_leak_oom.py"), "frames not as PyTorch orders them:\n%s", out);
    free(out);
}
END_TEST

/* MemoryViz.js reads pickles with its own small unpickler: protocol 2 to 4, these opcodes. */
START_TEST(test_memviz_pickle_uses_only_opcodes_the_viewer_reads)
{
    const char *snap = tmpfile_in(temp_dir(), "s.pickle");
    char *out;
    int rc = gm(&out, "export", "memory-viz", "-o", snap, fixture("h200_cupti_static_inject"));
    ck_assert_msg(rc == 0, "export exited %d:\n%s", rc, out);
    free(out);
    rc = py(&out, "-c",
            "import pickletools,sys\n"
            "ok={'PROTO','FRAME','APPEND','APPENDS','LIST','TUPLE','NEWFALSE','NEWTRUE','NONE','BINGET','LONG_BINGET',"
            "'BININT','BININT1','BININT2','EMPTY_DICT','EMPTY_LIST','LONG1','MARK','MEMOIZE','BINPUT','LONG_BINPUT',"
            "'SETITEM','SETITEMS','DICT','SHORT_BINUNICODE','BINUNICODE','STOP','EMPTY_TUPLE','TUPLE1','TUPLE2',"
            "'TUPLE3','BINFLOAT'}\n"
            "ops=[(o.name,a) for o,a,_ in pickletools.genops(open(sys.argv[1],'rb'))]\n"
            "assert ops[0][0]=='PROTO' and 2<=ops[0][1]<=4, ops[0]\n"
            "bad={n for n,_ in ops}-ok\nassert not bad, bad\nprint(len(ops),'opcodes')\n",
            snap);
    ck_assert_msg(rc == 0, "an opcode MemoryViz.js does not read:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_memviz_window_device_and_min_size_keep_the_snapshot_consistent)
{
    const char *dir = temp_dir();
    const char *all = tmpfile_in(dir, "all.pickle"), *win = tmpfile_in(dir, "win.pickle");
    const char *big = tmpfile_in(dir, "big.pickle"), *none = tmpfile_in(dir, "none.pickle");
    char *out, *o1, *o2, *o3;
    ck_assert_msg(gm(&out, "export", "memory-viz", "-o", all, fixture("h200_torch_leak_oom")) == 0, "%s", out);
    free(out);
    ck_assert_msg(gm(&out, "export", "memory-viz", "--from", "3", "--to", "6", "-o", win, fixture("h200_torch_leak_oom")) == 0,
                  "--from 3 --to 6:\n%s", out);
    free(out);
    ck_assert_msg(gm(&out, "export", "memory-viz", "--min-size", "48M", "-o", big, fixture("demo")) == 0,
                  "--min-size:\n%s", out);
    free(out);
    ck_assert_msg(gm(&out, "export", "memory-viz", "--device", "1", "-o", none, fixture("demo")) == 0 &&
                      strstr(out, "no device 1"), "--device 1 of a one-device log does not say so:\n%s", out);
    free(out);
    ck_assert_msg(py(&o1, "tests/export/check_memviz.py", all) == 0, "%s", o1);
    ck_assert_msg(py(&o2, "tests/export/check_memviz.py", win) == 0, "the window does not replay:\n%s", o2);
    ck_assert_msg(py(&o3, "tests/export/check_memviz.py", big) == 0, "--min-size does not replay:\n%s", o3);
    unsigned long n_all = 0, n_win = 0, n_big = 0, n_demo = 0;
    sscanf(strstr(o1, "alloc ") + 6, "%lu", &n_all);
    sscanf(strstr(o2, "alloc ") + 6, "%lu", &n_win);
    sscanf(strstr(o3, "alloc ") + 6, "%lu", &n_big);
    ck_assert_msg(n_win > 0 && n_win * 20 < n_all, "marks 3 to 6 hold %lu of %lu allocations", n_win, n_all);
    uint64_t allocs, ooms, peak;
    summary_of(fixture("demo"), &allocs, &ooms, &peak);
    n_demo = (unsigned long)allocs;
    ck_assert_msg(n_big > 0 && n_big < n_demo, "--min-size 48M kept %lu of the demo's %lu allocations", n_big, n_demo);
    free(o1);
    free(o2);
    free(o3);
    ck_assert_msg(py(&out, "-c",
                     "import pickle,sys\ns=pickle.load(open(sys.argv[1],'rb'))\n"
                     "assert all(e['size']>=48<<20 for t in s['device_traces'] for e in t if e['action']=='alloc')\n"
                     "w=pickle.load(open(sys.argv[2],'rb'))\nn=[a['name'] for a in w['external_annotations']]\n"
                     "assert n and n[0]==n[1], n\nprint(n[:2])\n", big, win) == 0,
                  "blocks under --min-size or marks outside the window:\n%s", out);
    free(out);
    ck_assert_msg(py(&out, "tests/export/check_memviz.py", none) == 0 && strstr(out, "alloc 0 "), "%s", out);
    free(out);
    int rc = gm(&out, "export", "memory-viz", "--to", "no such mark", "-o", none, fixture("demo"));
    ck_assert_msg(rc == 2 && strstr(out, "\"no such mark\" is not in this log"), "a missing mark: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* The log of a killed job is a cut log: the torch fixture cut inside the chunk where its marks
 * grow past their first array (every cut from 660 000 to 698 304 bytes once overran it). */
START_TEST(test_memviz_export_of_a_cut_log_names_the_cut_and_exits_2)
{
    const char *dir = temp_dir();
    const char *cut = tmpfile_in(dir, "cut.gmlog"), *snap = tmpfile_in(dir, "cut.pickle");
    static const long at[] = {660000, 680000, 698304, 700000};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        FILE *in = fopen(fixture("h200_torch_leak_oom"), "rb"), *o = fopen(cut, "wb");
        ck_assert_msg(in && o, "cannot copy the fixture to %s", cut);
        char buf[4096];
        for (long left = at[i]; left > 0;) {
            size_t n = fread(buf, 1, left < (long)sizeof buf ? (size_t)left : sizeof buf, in);
            ck_assert_msg(n > 0 && fwrite(buf, 1, n, o) == n, "copying %ld bytes", at[i]);
            left -= (long)n;
        }
        fclose(in);
        fclose(o);
        char *out;
        int rc = gm(&out, "export", "memory-viz", "-o", snap, cut);
        ck_assert_msg(rc == 2 && strstr(out, "the log was cut short"),
                      "export memory-viz of the first %ld bytes: exit %d (want 2 and the cut named):\n%s", at[i], rc, out);
        free(out);
    }
}
END_TEST

/* A log with strings no viewer must choke on: a mark label that would end a script element and
 * holds invalid UTF-8, and memory of a library whose name is not UTF-8 either. */
static void hostile_log(const char *path)
{
    tlog_t b = {0};
    tlog_begin(&b, 0);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 0, "GPU \xff", 8 * 1024 * TLOG_MiB);
    tlog_site(&b, 0, 7);
    struct { gmlog_string_t s; char text[16]; } str = {{{GMLOG_STRING, 0, GMLOG_NO_DEVICE, 0, 0}, 5, 11}, "libbad\xfe.so"};
    tlog_rec(&b, &str, sizeof str, 10);
    tlog_segment(&b, 20, GMLOG_SEGMENT_ALLOC, TLOG_SEG, 64 * TLOG_MiB);
    tlog_alloc(&b, 30, TLOG_A, 4 * TLOG_MiB, GMLOG_KIND_POOL << GMLOG_KIND_SHIFT, 7);
    tlog_mark(&b, 40, 1, "</script><b>x\xc3(");
    gmlog_alloc_t f = {{GMLOG_ALLOC, 0, 0, GMLOG_KIND_FOREIGN << GMLOG_KIND_SHIFT, 0}, 0x7e0000000000ull, 2 * TLOG_MiB, 7, 100, 5};
    tlog_rec(&b, &f, sizeof f, 50);
    tlog_free(&b, 60, TLOG_A);
    tlog_mark(&b, 70, 2, "step 2");
    tlog_end_chunk(&b);
    ck_assert_msg(tlog_write(&b, path) == 0, "cannot write %s", path);
    tlog_free_buf(&b);
}

START_TEST(test_exports_and_page_survive_strings_that_are_not_utf8_or_end_a_script)
{
    const char *dir = temp_dir();
    const char *log = tmpfile_in(dir, "hostile.gmlog"), *snap = tmpfile_in(dir, "s.pickle");
    const char *trace = tmpfile_in(dir, "t.json"), *page = tmpfile_in(dir, "p.html");
    hostile_log(log);
    char *out;
    ck_assert_msg(gm(&out, "export", "memory-viz", "-o", snap, log) == 0, "memory-viz:\n%s", out);
    free(out);
    ck_assert_msg(gm(&out, "export", "perfetto", "-o", trace, log) == 0, "perfetto:\n%s", out);
    free(out);
    ck_assert_msg(gm(&out, "timeline", "--html", page, log) == 0, "timeline:\n%s", out);
    free(out);
    int rc = py(&out, "tests/export/check_memviz.py", snap, "--expect-allocs", "2", "--expect-categories");
    ck_assert_msg(rc == 0 && strstr(out, "libbad\xef\xbf\xbd.so"), "the pickle's library name:\n%s", out);
    free(out);
    ck_assert_msg(py(&out, "tests/export/check_perfetto.py", trace, "--outside") == 0, "the trace:\n%s", out);
    free(out);
    rc = py(&out, "-c",
            "import json,re,sys\nt=open(sys.argv[1],encoding='utf-8').read()\n"
            "body=t.split('id=\"gmdata\">',1)[1]\nassert body.count('</script>')>=1\n"
            "d=json.loads(body.split('</script>',1)[0])\n"
            "print(d['logs'][0]['marks'][0][1])\n", page);
    ck_assert_msg(rc == 0 && strstr(out, "</script><b>x\xef\xbf\xbd("), "the page's data does not hold the label:\n%s", out);
    free(out);
}
END_TEST

#define MS 1000000ull
#define TSEG (TLOG_SEG + 0x4000000)

/* PyTorch's cache kept, the bridge attached: gmshim's segment and PyTorch's cudaMalloc of it (one
 * 20 MiB ALLOC), PyTorch's segment (stream 5), tensor A (1 MiB at its base) and B (2 MiB after
 * it, stream 5); both frees requested, A's completed, B's never (pending at the end). */
static void torch_pending_log(const char *path)
{
    tlog_t b = {0};
    tlog_begin(&b, 0);
    tlog_torch_keep(&b);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 1 * MS, "GPU", 80 * 1024 * TLOG_MiB);
    tlog_segment(&b, 1 * MS, GMLOG_SEGMENT_ALLOC, TSEG, 20 * TLOG_MiB);
    tlog_alloc(&b, 1 * MS, TSEG, 20 * TLOG_MiB, GMLOG_KIND_POOL << GMLOG_KIND_SHIFT | GMLOG_A_MISS, 3);
    tlog_tensor(&b, 1 * MS, GMLOG_T_SEGMENT_ALLOC, TSEG, 20 * TLOG_MiB, 5, 7);
    tlog_tensor(&b, 2 * MS, GMLOG_T_ALLOC, TSEG, TLOG_MiB, 0, 7);
    tlog_tensor(&b, 3 * MS, GMLOG_T_ALLOC, TSEG + TLOG_MiB, 2 * TLOG_MiB, 5, 9);
    tlog_tensor(&b, 4 * MS, GMLOG_T_FREE_REQUESTED, TSEG, TLOG_MiB, 0, 11);
    tlog_tensor(&b, 5 * MS, GMLOG_T_FREE_REQUESTED, TSEG + TLOG_MiB, 2 * TLOG_MiB, 5, 11);
    tlog_tensor(&b, 6 * MS, GMLOG_T_FREE_COMPLETED, TSEG, TLOG_MiB, 0, 0);
    tlog_end_chunk(&b);
    ck_assert_msg(tlog_write(&b, path) == 0, "cannot write %s", path);
    tlog_free_buf(&b);
}

/* Expandable segments: two ranges mapped and a tensor across them draw as PyTorch draws them: one
 * segment with is_expandable, its tensor inside it, and the maps as segment_map entries. */
START_TEST(test_memviz_of_expandable_segments_is_one_expandable_segment)
{
    const char *dir = temp_dir();
    const char *log = tmpfile_in(dir, "exp.gmlog"), *snap = tmpfile_in(dir, "s.pickle");
    tlog_t b = {0};
    tlog_begin(&b, 0);
    tlog_torch_keep(&b);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 1 * MS, "GPU", 80 * 1024 * TLOG_MiB);
    tlog_tensor(&b, 1 * MS, GMLOG_T_SEGMENT_MAP, TSEG, 20 * TLOG_MiB, 0, 7);
    tlog_tensor(&b, 2 * MS, GMLOG_T_SEGMENT_MAP, TSEG + 20 * TLOG_MiB, 20 * TLOG_MiB, 0, 7);
    tlog_tensor(&b, 3 * MS, GMLOG_T_ALLOC, TSEG + 8 * TLOG_MiB, 24 * TLOG_MiB, 0, 7);
    tlog_end_chunk(&b);
    ck_assert_msg(tlog_write(&b, log) == 0, "cannot write %s", log);
    tlog_free_buf(&b);
    char *out;
    ck_assert_msg(gm(&out, "export", "memory-viz", "-o", snap, log) == 0, "memory-viz:\n%s", out);
    free(out);
    int rc = py(&out, "-c",
                "import pickle,sys\ns=pickle.load(open(sys.argv[1],'rb'))\n"
                "g=s['segments']\nassert len(g)==1 and g[0]['is_expandable'] and g[0]['total_size']==40<<20, g\n"
                "a=[x['state'] for x in g[0]['blocks']]\nassert a==['inactive','active_allocated','inactive'], a\n"
                "t=[e['action'] for e in s['device_traces'][0]]\n"
                "assert t==['segment_map','segment_map','alloc'], t\nprint('ok')\n",
                snap);
    ck_assert_msg(rc == 0, "the expandable segment:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_memviz_of_tensors_has_pending_frees_as_pytorch_draws_them)
{
    const char *dir = temp_dir();
    const char *log = tmpfile_in(dir, "torch.gmlog"), *snap = tmpfile_in(dir, "s.pickle");
    torch_pending_log(log);
    char *out;
    ck_assert_msg(gm(&out, "export", "memory-viz", "-o", snap, log) == 0, "memory-viz:\n%s", out);
    free(out);
    int rc = py(&out, "tests/export/check_memviz.py", snap, "--expect-allocs", "2");
    ck_assert_msg(rc == 0 && strstr(out, "pending 2097152 "), "the segment's cudaMalloc drawn, or B not pending:\n%s", out);
    free(out);
    /* A: requested at 4 ms, completed at 6 ms; B: requested, never completed; the segment holds B
     * as active_pending_free between two inactive pieces, on B's stream */
    rc = py(&out, "-c",
            "import pickle,sys\ns=pickle.load(open(sys.argv[1],'rb'))\n"
            "t=s['device_traces'][0]\nbase=min(e['addr'] for e in t if e['action']=='alloc')\n"
            "ev=[(e['action'],e['addr']-base,e['time_us']%1000000) for e in t if e['action']!='segment_alloc']\n"
            "assert ev==[('alloc',0,2000),('alloc',1<<20,3000),('free_requested',0,4000),"
            "('free_requested',1<<20,5000),('free_completed',0,6000)], ev\n"
            "g=s['segments']\nassert len(g)==1 and g[0]['stream']==5, g\n"
            "b=[(x['address']-base,x['size'],x['state']) for x in g[0]['blocks']]\n"
            "assert b==[(0,1<<20,'inactive'),(1<<20,2<<20,'active_pending_free'),(3<<20,17<<20,'inactive')], b\n"
            "assert g[0]['allocated_size']==0 and g[0]['active_size']==2<<20, g[0]\nprint('ok')\n",
            snap);
    ck_assert_msg(rc == 0, "the tensors' trace or segment:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_perfetto_of_tensors_counts_tensors_and_pending_bytes)
{
    const char *dir = temp_dir();
    const char *log = tmpfile_in(dir, "torch.gmlog"), *trace = tmpfile_in(dir, "t.json");
    torch_pending_log(log);
    char *out;
    ck_assert_msg(gm(&out, "export", "perfetto", "-o", trace, log) == 0, "perfetto:\n%s", out);
    free(out);
    int rc = py(&out, "tests/export/check_perfetto.py", trace, "--peak", "allocated=3145728", "--last", "allocated=0",
                "--peak", "reserved=20971520", "--peak", "pending=3145728", "--last", "pending=2097152");
    ck_assert_msg(rc == 0, "allocated, reserved and pending are not PyTorch's:\n%s", out);
    free(out);
}
END_TEST

/* The fragmentation scenario (tests/gpu/torch_scenarios.py frag) at its mark "ask": PyTorch's one
 * 1.5 GiB segment holds seven 100 MiB tensors of the script's line with a free piece between
 * each two, as PyTorch's own snapshot draws it. */
START_TEST(test_memviz_of_a_tensor_log_draws_tensors_inside_pytorchs_segments)
{
    const char *snap = tmpfile_in(temp_dir(), "s.pickle");
    char *out;
    int rc = gm(&out, "export", "memory-viz", "--to", "ask", "-o", snap, fixture("h200_scen_frag_keep"));
    ck_assert_msg(rc == 0, "export exited %d:\n%s", rc, out);
    free(out);
    rc = py(&out, "-c",
            "import pickle,sys\ns=pickle.load(open(sys.argv[1],'rb'))\ng=s['segments']\n"
            "assert len(g)==1 and g[0]['total_size']==1536<<20, [x['total_size'] for x in g]\n"
            "st=[b['state'][0] for b in g[0]['blocks']]\nassert ''.join(st)=='ia'*7+'i', st\n"
            "act=[b for b in g[0]['blocks'] if b['state']=='active_allocated']\n"
            "assert all(b['size']==100<<20 and b['frames'][-1]['filename'].endswith('torch_scenarios.py') for b in act)\n"
            "assert g[0]['frames'], 'the segment has no frames'\nprint(act[0]['frames'][-1])\n",
            snap);
    ck_assert_msg(rc == 0, "the segment is not PyTorch's with its tensors:\n%s", out);
    free(out);
}
END_TEST

/* The demo's log with its program's build id changed: the program on disk is another build, so
 * the names read from it may be wrong. The page's flame graph and the pickle's frames say so of
 * each such name, as the text reports do. */
START_TEST(test_names_from_another_build_are_marked_unsure_in_the_page_and_the_pickle)
{
    const char *dir = temp_dir();
    const char *log = tmpfile_in(dir, "rebuilt.gmlog"), *snap = tmpfile_in(dir, "r.pickle");
    const char *page = tmpfile_in(dir, "r.html");
    size_t len;
    uint8_t *d = gm_slurp(fixture("demo"), &len);
    int changed = 0;
    for (size_t p = 0; p + sizeof(gmlog_module_t) <= len && !changed; p += 8) {
        gmlog_module_t m;
        memcpy(&m, d + p, sizeof m);
        size_t tail = sizeof m + m.build_id_len + m.path_len;
        if (m.h.type != GMLOG_MODULE || m.h.len8 * 8u < tail || p + tail > len || !m.build_id_len)
            continue;
        const char *path = (const char *)d + p + sizeof m + m.build_id_len;
        if (m.path_len >= 11 && !memcmp(path + m.path_len - 11, "/demo_train", 11))
            d[p + sizeof m] ^= 0xff, changed = 1;
    }
    ck_assert_msg(changed, "no module record of the demo program in the fixture");
    gm_spew(log, d, len);
    free(d);
    char *out;
    ck_assert_msg(gm(&out, "--symbol-path", FIXTURES, "export", "memory-viz", "-o", snap, log) == 0, "memory-viz:\n%s", out);
    free(out);
    ck_assert_msg(gm(&out, "--symbol-path", FIXTURES, "timeline", "--html", page, log) == 0, "timeline:\n%s", out);
    free(out);
    const char *marked = "keep_loss_history " SITE_UNSURE;
    uint8_t *pk = gm_slurp(snap, &len);
    ck_assert_msg(memmem(pk, len, marked, strlen(marked)) && !memmem(pk, len, "keep_loss_history\x94", 18) &&
                  !memmem(pk, len, "keep_loss_history\x8c", 18), "the pickle names the other build's function "
                  "without '%s'", marked);
    free(pk);
    char *html = (char *)gm_slurp(page, &len);
    ck_assert_msg(strstr(html, marked) && !strstr(html, "keep_loss_history (demo_train"),
                  "the page names the other build's function without '%s'", marked);
    free(html);
}
END_TEST

/* Under GMSHIM_SEGMENTS=vmm each 2 MiB page is a segment and the demo's blocks cover many: the
 * snapshot's segments hold every byte the trace leaves live, each page a block covers. */
START_TEST(test_memviz_of_a_vmm_log_draws_blocks_across_every_page_they_cover)
{
    const char *dir = temp_dir();
    const char *log = tmpfile_in(dir, "vmm.gmlog"), *snap = tmpfile_in(dir, "vmm.pickle");
    char env_log[700], prog[600];
    unlink(log);
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/demo_train"));
    const char *argv[] = {prog, NULL};
    const char *env[] = {env_log, "GMSHIM_SEGMENTS=vmm", "FAKECUDA_MEM=1G", NULL};
    char *out;
    ck_assert_msg(run_program(argv, env, 1, &out) == 0, "demo_train under vmm:\n%s", out);
    free(out);
    ck_assert_msg(gm(&out, "export", "memory-viz", "--to", "6", "-o", snap, log) == 0, "memory-viz:\n%s", out);
    free(out);
    ck_assert_msg(py(&out, "tests/export/check_memviz.py", snap) == 0, "the pickle:\n%s", out);
    free(out);
    int rc = py(&out, "-c",
                "import pickle,sys\ns=pickle.load(open(sys.argv[1],'rb'))\nlive={}\n"
                "for e in s['device_traces'][0]:\n"
                "    if e['action']=='alloc': live[e['addr']]=e['size']\n"
                "    elif e['action']=='free_completed': live.pop(e['addr'],None)\n"
                "held=sum(b['size'] for g in s['segments'] if g['device']==0 for b in g['blocks'] if b['state']!='inactive')\n"
                "print('live',sum(live.values()),'held',held)\nsys.exit(0 if live and sum(live.values())==held else 1)\n",
                snap);
    ck_assert_msg(rc == 0, "the segments do not hold what the trace leaves live: %s", out);
    free(out);
    unlink(log);
}
END_TEST

START_TEST(test_export_usage_errors_say_what_is_wrong)
{
    static const struct {
        const char *args[6];
        const char *says;
    } cases[] = {
        {{"export", NULL}, "a format is needed"},
        {{"export", "svg", "-o", "x", "l", NULL}, "no format 'svg'"},
        {{"export", "perfetto", FIXTURES "/demo.gmlog", NULL}, "-o FILE is needed"},
        {{"export", "perfetto", "-o", "x", NULL}, "no log given"},
        {{"export", "perfetto", "--from", "1", "-o", NULL}, "needs a value"},
        {{"export", "perfetto", "--to", "1", "-o", "x"}, "is an option of export memory-viz"},
        {{"export", "memory-viz", "--resolution", "1ms", "-o", "x"}, "is an option of export perfetto"},
        {{"export", "perfetto", "--resolution", "fast", "-o", "x"}, "a time such as"},
        {{"export", "memory-viz", "--device", "x", "-o", "y"}, "a device number"},
        {{"export", "memory-viz", "-o", "x", "a.gmlog", "b.gmlog"}, "one log at a time"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *a[8] = {0};
        for (int k = 0; k < 6 && cases[i].args[k]; k++)
            a[k] = cases[i].args[k];
        char *out;
        int rc = runv(&out, build_path("gmshim"), a);
        ck_assert_msg(rc == 1 && strstr(out, cases[i].says), "case %zu: exit %d, no '%s':\n%s", i, rc, cases[i].says, out);
        free(out);
    }
    char *h1, *h2;
    int r1 = gm(&h1, "help", "export"), r2 = gm(&h2, "export", "--help");
    ck_assert_msg(r1 == 0 && r2 == 0 && !strcmp(h1, h2) && strstr(h1, "perfetto") && strstr(h1, "memory-viz") &&
                      strstr(h1, "event index"), "help export (%d) and export --help (%d):\n%s", r1, r2, h1);
    free(h1);
    free(h2);
}
END_TEST

/* ---- what the exports and the timeline take and leave: a directory of logs, no file on failure -- */

/* A whole file as a string (NULL when it cannot be read), its length in *len. */
static char *file_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (!f)
        return NULL;
    char *b = malloc(1 << 20);
    ck_assert(b != NULL);
    *len = fread(b, 1, (1 << 20) - 1, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

START_TEST(test_timeline_and_export_read_a_directory_as_report_does)
{
    const char *dir = temp_dir();
    char log[512], out[600], cmd[2048];
    snprintf(log, sizeof log, "%s/rank0.gmlog", dir);
    snprintf(cmd, sizeof cmd, "cp %s %s", fixture("demo"), log);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    char *txt;
    int rc = gm(&txt, "report", dir);
    ck_assert_msg(rc == 0, "report DIR: rc %d\n%.2000s", rc, txt);
    free(txt);
    rc = gm(&txt, "timeline", "--json", dir);
    ck_assert_msg(rc == 0 && strstr(txt, "\"points\"") && strstr(txt, "rank0.gmlog"), "timeline --json DIR: rc %d\n%.2000s",
                  rc, txt);
    free(txt);
    snprintf(out, sizeof out, "%s/t.svg", dir);
    rc = gm(&txt, "timeline", "--svg", out, dir);
    ck_assert_msg(rc == 0 && access(out, F_OK) == 0, "timeline --svg FILE DIR: rc %d\n%.2000s", rc, txt);
    free(txt);
    snprintf(out, sizeof out, "%s/p.json", dir);
    rc = gm(&txt, "export", "perfetto", "-o", out, dir);
    ck_assert_msg(rc == 0, "export perfetto DIR: rc %d\n%.2000s", rc, txt);
    free(txt);
    size_t len;
    char *json = file_text(out, &len);
    ck_assert_msg(json && strstr(json, "\"traceEvents\"") && strstr(json, "device 0 reserved"), "the trace of DIR:\n%.2000s", json);
    free(json);
    snprintf(out, sizeof out, "%s/m.pickle", dir);
    rc = gm(&txt, "export", "memory-viz", "-o", out, dir);
    ck_assert_msg(rc == 0 && access(out, F_OK) == 0, "export memory-viz DIR: rc %d\n%.2000s", rc, txt);
    free(txt);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}
END_TEST

START_TEST(test_a_failed_export_or_timeline_leaves_no_file_and_keeps_an_old_one)
{
    const char *dir = temp_dir();
    char out[600], old[600], cmd[1024];
    const char *bad = "/nonexistent/none.gmlog";
    static const char *const forms[][3] = {{"export", "perfetto", "-o"}, {"export", "memory-viz", "-o"},
                                           {"timeline", "--svg", NULL},  {"timeline", "--html", NULL}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(out, sizeof out, "%s/out%zu", dir, i);
        char *txt;
        int rc = forms[i][2] ? gm(&txt, forms[i][0], forms[i][1], forms[i][2], out, bad)
                             : gm(&txt, forms[i][0], forms[i][1], out, bad);
        ck_assert_msg(rc == 1 && access(out, F_OK) != 0, "%s %s of a missing log: rc %d, the file %s:\n%.2000s",
                      forms[i][0], forms[i][1], rc, access(out, F_OK) ? "absent" : "left behind", txt);
        free(txt);
        snprintf(old, sizeof old, "%s/old%zu", dir, i);
        FILE *f = fopen(old, "w");
        ck_assert_msg(f && fputs("old\n", f) >= 0 && fclose(f) == 0, "cannot write %s", old);
        rc = forms[i][2] ? gm(&txt, forms[i][0], forms[i][1], forms[i][2], old, bad)
                         : gm(&txt, forms[i][0], forms[i][1], old, bad);
        size_t len;
        char *kept = file_text(old, &len);
        ck_assert_msg(rc == 1 && kept && len == 4 && !memcmp(kept, "old\n", 4), "%s %s over an old file: rc %d, %zu bytes left",
                      forms[i][0], forms[i][1], rc, len);
        free(kept);
        free(txt);
    }
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    char *ls;
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    run_program(argv, NULL, 0, &ls);
    ck_assert_msg(!strstr(ls, "out") && !strstr(ls, ".old") && strstr(ls, "old3"), "no temporary file may stay behind:\n%s", ls);
    free(ls);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}
END_TEST

/* --python-frames first / only: the script's lines lead the stack (or are all of it) in the
 * snapshot and in the HTML page's flame graph, instead of 16 frames of libtorch. */
START_TEST(test_python_frames_first_or_only_in_the_snapshot_and_the_page)
{
    const char *dir = temp_dir();
    const char *snap = tmpfile_in(dir, "s.pickle");
    static const char *const order[] = {"first", "only"};
    for (int k = 0; k < 2; k++) {
        char *out;
        int rc = gm(&out, "export", "memory-viz", "--python-frames", order[k], "-o", snap, fixture("h200_torch_leak_oom"));
        ck_assert_msg(rc == 0, "export --python-frames %s exited %d:\n%s", order[k], rc, out);
        free(out);
        rc = py(&out, "-c",
                "import pickle,sys\n"
                "s=pickle.load(open(sys.argv[1],'rb'))\n"
                "a=[e for e in s['device_traces'][0] if e['action']=='alloc'][-1]['frames']\n"
                "py=[i for i,f in enumerate(a) if f['filename'].endswith('.py')]\n"
                "assert py and py==list(range(len(py))), a\n"
                "assert (len(py)==len(a)) == (sys.argv[2]=='only'), a\n"
                "print(a[0])\n",
                snap, order[k]);
        ck_assert_msg(rc == 0 && strstr(out, "torch_leak_oom.py"), "--python-frames %s: frames:\n%.3000s", order[k], out);
        free(out);
    }
    const char *page = tmpfile_in(dir, "t.html");
    char *out;
    int rc = gm(&out, "timeline", "--python-frames", "only", "--html", page, fixture("h200_torch_leak_oom"));
    ck_assert_msg(rc == 0, "timeline --python-frames only: rc %d\n%s", rc, out);
    free(out);
    size_t len;
    char *html = file_text(page, &len);
    ck_assert_msg(html && strstr(html, "torch_leak_oom.py") && !strstr(html, "frames\"") && !strstr(html, ".so: ") &&
                      !strstr(html, "(libtorch"),
                  "the page's flame graph still has native frames");
    free(html);
    rc = gm(&out, "export", "memory-viz", "--python-frames", "sometimes", "-o", snap, fixture("demo"));
    ck_assert_msg(rc == 1 && strstr(out, "--python-frames"), "a bad --python-frames: rc %d\n%s", rc, out);
    free(out);
}
END_TEST

Suite *analyzer_export_suite(void)
{
    Suite *s = suite_create("analyzer_export");
    TCase *tc = tcase_create("export");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_perfetto_export_of_each_fixture_is_a_trace_with_the_reports_peaks);
    tcase_add_test(tc, test_perfetto_memory_outside_the_pool_is_a_counter_per_library);
    tcase_add_test(tc, test_perfetto_logs_are_processes_even_with_one_pid);
    tcase_add_test(tc, test_perfetto_resolution_downsamples_to_bucket_maxima_keeping_the_peak);
    tcase_add_test(tc, test_perfetto_oom_instant_carries_the_cause_the_oom_report_gives);
    tcase_add_test(tc, test_memviz_export_of_each_fixture_loads_with_pickle_and_replays);
    tcase_add_test(tc, test_memviz_frames_are_python_and_native_innermost_first);
    tcase_add_test(tc, test_memviz_pickle_uses_only_opcodes_the_viewer_reads);
    tcase_add_test(tc, test_memviz_window_device_and_min_size_keep_the_snapshot_consistent);
    tcase_add_test(tc, test_memviz_export_of_a_cut_log_names_the_cut_and_exits_2);
    tcase_add_test(tc, test_exports_and_page_survive_strings_that_are_not_utf8_or_end_a_script);
    tcase_add_test(tc, test_memviz_of_tensors_has_pending_frees_as_pytorch_draws_them);
    tcase_add_test(tc, test_memviz_of_expandable_segments_is_one_expandable_segment);
    tcase_add_test(tc, test_perfetto_of_tensors_counts_tensors_and_pending_bytes);
    tcase_add_test(tc, test_memviz_of_a_tensor_log_draws_tensors_inside_pytorchs_segments);
    tcase_add_test(tc, test_names_from_another_build_are_marked_unsure_in_the_page_and_the_pickle);
    tcase_add_test(tc, test_memviz_of_a_vmm_log_draws_blocks_across_every_page_they_cover);
    tcase_add_test(tc, test_export_usage_errors_say_what_is_wrong);
    suite_add_tcase(s, tc);
    TCase *fl = tcase_create("files");
    tcase_set_timeout(fl, 120);
    tcase_add_test(fl, test_timeline_and_export_read_a_directory_as_report_does);
    tcase_add_test(fl, test_a_failed_export_or_timeline_leaves_no_file_and_keeps_an_old_one);
    tcase_add_test(fl, test_python_frames_first_or_only_in_the_snapshot_and_the_page);
    suite_add_tcase(s, fl);
    return s;
}
