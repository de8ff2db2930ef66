/* Rendering of call sites for the reports. Native frames are symbolized through symbolize.c
 * (cached per module); Python frames come from the log's strings. Nothing here trusts that a
 * site, string or module id in the log was ever defined. */
#include "sites.h"
#include "output.h"
#include "symbolize.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "?";
}

int site_parse_python_frames(const char *who, const char *text)
{
    if (!strcmp(text, "first"))
        return SITE_PY_FIRST;
    if (!strcmp(text, "only"))
        return SITE_PY_ONLY;
    fprintf(stderr, "%s: --python-frames %s: use first or only\n", who, text);
    return -1;
}

size_t site_frames(const model_t *m, uint32_t site_id, site_frame_t *out, size_t max)
{
    const model_sitedef_t *s = model_site(m, site_id);
    if (!s)
        return 0;
    size_t n = 0;
    for (unsigned i = 0; i < s->npy && n < max; i++) {
        site_frame_t *f = &out[n++];
        memset(f, 0, sizeof *f);
        f->python = 1;
        f->function = model_string(m, s->py[i].function);
        f->file = model_string(m, s->py[i].file);
        f->line = s->py[i].line;
        if (!f->function)
            f->function = "?";
    }
    for (unsigned i = 0; i < s->nnative && n < max; i++) {
        site_frame_t *f = &out[n++];
        memset(f, 0, sizeof *f);
        uint64_t raw = s->native[i];
        uint32_t mod_id = GMLOG_FRAME_MODULE(raw);
        f->offset = GMLOG_FRAME_OFFSET(raw);
        const model_module_t *mod = mod_id != GMLOG_FRAME_UNKNOWN_MODULE ? model_module(m, mod_id) : NULL;
        if (mod) {
            f->module = mod->path;
            sym_frame_t sf;
            sym_resolve(mod->path, mod->build_id, mod->build_id_len, f->offset, &sf);
            f->function = sf.function;
            f->symbol = sf.symbol && sf.function && strcmp(sf.symbol, sf.function) ? sf.symbol : NULL;
            f->file = sf.file;
            f->line = sf.line;
            f->build_id_differs = sf.build_id_differs;
        }
        if (!f->function) {
            if (mod)
                snprintf(f->buf, sizeof f->buf, "%.24s+0x%llx", base_name(mod->path), (unsigned long long)f->offset);
            else
                snprintf(f->buf, sizeof f->buf, "0x%llx", (unsigned long long)f->offset);
            f->function = f->buf;
        }
    }
    return n;
}

const char *site_frame_name(const site_frame_t *f, char *buf, size_t len)
{
    if (!f->build_id_differs || f->function == f->buf)
        return f->function;
    snprintf(buf, len, "%s " SITE_UNSURE, f->function);
    return buf;
}

static int boring_module(const char *path)
{
    const char *b = base_name(path);
    /* the sanitizers' runtimes: under ASan or TSan their interceptor of backtrace() is innermost */
    return !strncmp(b, "libcudart", 9) || !strncmp(b, "libgmshim", 9) || !strncmp(b, "libc.so", 7) ||
           !strncmp(b, "libc-", 5) || !strncmp(b, "libcuda.so", 10) || !strncmp(b, "libcupti", 8) ||
           !strncmp(b, "libasan", 7) || !strncmp(b, "libtsan", 7) || !strncmp(b, "libubsan", 8) ||
           !strncmp(b, "liblsan", 7) || !strncmp(b, "libclang_rt", 11);
}

/* The label before it is told apart from others: the first frame worth naming. Frames are
 * resolved only up to it (a Python site's first frame needs no symbols). */
static const char *site_base_label(const model_t *m, uint32_t site_id, char *buf, size_t len)
{
    site_frame_t fr[SITE_MAX_FRAMES];
    const model_sitedef_t *def = model_site(m, site_id);
    size_t n = site_frames(m, site_id, fr, def && def->npy ? 1 : SITE_MAX_FRAMES);
    const site_frame_t *pick = NULL;
    for (size_t i = 0; i < n && !pick; i++)
        if (fr[i].python || !fr[i].module || !boring_module(fr[i].module))
            pick = &fr[i];
    if (!pick && n)
        pick = &fr[0];
    if (!pick) {
        if (site_id)
            snprintf(buf, len, "site %u (not defined in the log)", site_id);
        else
            snprintf(buf, len, "unknown site (no stack recorded)");
        return buf;
    }
    char name[SITE_NAME_MAX + sizeof SITE_UNSURE + 8];
    const char *fn = site_frame_name(pick, name, sizeof name);
    if (pick->file)
        snprintf(buf, len, "%s (%s:%u)", fn, base_name(pick->file), pick->line);
    else if (pick->module && pick->function != pick->buf)
        snprintf(buf, len, "%s (%s)", fn, base_name(pick->module));
    else
        snprintf(buf, len, "%s", fn);
    return buf;
}

typedef struct site_named {
    char *label;
    size_t index;
} site_named_t;

static int site_named_cmp(const void *a, const void *b)
{
    const site_named_t *x = a, *y = b;
    int c = strcmp(x->label, y->label);
    return c ? c : x->index < y->index ? -1 : x->index > y->index;
}

/* Marks, once per model (and again when sites were added), each site whose label another site
 * shares. The mark is a cache in the model, behind a lock: reports label sites from threads. */
static pthread_mutex_t site_twins_lock = PTHREAD_MUTEX_INITIALIZER;

static int site_has_twin(const model_t *m, uint32_t site_id)
{
    const model_sitedef_t *def = model_site(m, site_id);
    if (!def)
        return 0;
    size_t at = (size_t)(def - m->sites);
    model_t *cache = (model_t *)m;
    pthread_mutex_lock(&site_twins_lock);
    if (cache->site_twins_n != m->nsites) {
        free(cache->site_twins);
        cache->site_twins = calloc(m->nsites ? m->nsites : 1, 1);
        site_named_t *v = calloc(m->nsites ? m->nsites : 1, sizeof *v);
        cache->site_twins_n = cache->site_twins && v ? m->nsites : 0;
        for (size_t i = 0; i < cache->site_twins_n; i++) {
            char lbl[512];
            v[i] = (site_named_t){strdup(site_base_label(m, m->sites[i].id, lbl, sizeof lbl)), i};
            if (!v[i].label)
                v[i].label = strdup("");
        }
        int ok = 1;
        for (size_t i = 0; i < cache->site_twins_n; i++)
            ok &= v[i].label != NULL;
        if (ok && cache->site_twins_n > 1) {
            qsort(v, cache->site_twins_n, sizeof *v, site_named_cmp);
            for (size_t i = 1; i < cache->site_twins_n; i++)
                if (!strcmp(v[i].label, v[i - 1].label))
                    cache->site_twins[v[i].index] = cache->site_twins[v[i - 1].index] = 1;
        }
        for (size_t i = 0; v && i < cache->site_twins_n; i++)
            free(v[i].label);
        free(v);
    }
    int twin = at < cache->site_twins_n && cache->site_twins[at];
    pthread_mutex_unlock(&site_twins_lock);
    return twin;
}

const char *site_label(const model_t *m, uint32_t site_id, char *buf, size_t len)
{
    site_base_label(m, site_id, buf, len);
    if (site_has_twin(m, site_id)) { /* the id JSON gives as "site": one line, one stack */
        size_t n = strlen(buf);
        snprintf(buf + n, len > n ? len - n : 0, " [site %u]", site_id);
    }
    return buf;
}

/* Libraries of the framework and the CUDA stack: under a Python line their frames are the
 * machinery between the user's line and the allocation, nothing the user can change. */
static int framework_module(const char *path)
{
    static const char *const prefixes[] = {"libtorch", "libc10", "libcuda", "libcudart", "libcublas", "libcudnn",
                                           "libnccl", "libcusparse", "libcufft", "libcurand", "libcusolver",
                                           "libnvrtc", "libnvJitLink", "libcupti", "libgmshim", "libtriton"};
    const char *b = base_name(path);
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(b, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

static int unsymbolised(const site_frame_t *x)
{
    return !x->python && x->module && x->function == x->buf;
}

void site_print(FILE *f, const model_t *m, uint32_t site_id, const char *indent, unsigned depth, int fold)
{
    site_frame_t fr[SITE_MAX_FRAMES];
    size_t n = site_frames(m, site_id, fr, SITE_MAX_FRAMES);
    if (!n) {
        fprintf(f, "%s%s(no stack: %s)%s\n", indent, rep_dim(),
                site_id ? "site not defined in the log" : "set GMSHIM_STACK_DEPTH", rep_reset());
        return;
    }
    int python = 0;
    for (size_t i = 0; i < n; i++)
        python |= fr[i].python;
    unsigned lines = 0;
    for (size_t i = 0; i < n; lines++) {
        if (depth && lines >= depth) {
            fprintf(f, "%s%s... %zu more frames%s\n", indent, rep_dim(), n - i, rep_reset());
            break;
        }
        const site_frame_t *x = &fr[i];
        if (fold && python && !x->python && x->module && framework_module(x->module)) {
            /* one line for the run of framework frames, naming its libraries */
            size_t j = i;
            const char *libs[3] = {NULL};
            int nlibs = 0, more = 0;
            for (; j < n && !fr[j].python && fr[j].module && framework_module(fr[j].module); j++) {
                const char *b = base_name(fr[j].module);
                int known = 0;
                for (int k = 0; k < nlibs; k++)
                    known |= !strcmp(libs[k], b);
                if (!known && nlibs < 3)
                    libs[nlibs++] = b;
                else if (!known)
                    more = 1;
            }
            fprintf(f, "%s    %s… %zu frame%s in %s%s%s%s%s%s%s\n", indent, rep_dim(), j - i, j - i == 1 ? "" : "s",
                    libs[0], nlibs > 1 ? ", " : "", nlibs > 1 ? libs[1] : "", nlibs > 2 ? ", " : "",
                    nlibs > 2 ? libs[2] : "", more ? ", ..." : "", rep_reset());
            i = j;
            continue;
        }
        if (unsymbolised(x)) {
            /* frames without a name in one library: the library once, then the offsets */
            fprintf(f, "%s    %s", indent, base_name(x->module));
            size_t j = i;
            for (; j < n && unsymbolised(&fr[j]) && !strcmp(fr[j].module, x->module); j++)
                fprintf(f, " +0x%llx", (unsigned long long)fr[j].offset);
            if (x->build_id_differs)
                fprintf(f, " %s[build id differs: the file changed since the run]%s", rep_yellow(), rep_reset());
            fputc('\n', f);
            i = j;
            continue;
        }
        /* C++ names with their templates run to thousands of characters: the text shows the
         * start, the JSON the whole name. */
        size_t len = strlen(x->function);
        fprintf(f, "%s%s%.*s%s", indent, x->python ? "py  " : "    ", (int)(len > SITE_NAME_MAX ? SITE_NAME_MAX : len),
                x->function, len > SITE_NAME_MAX ? "..." : "");
        if (x->file)
            fprintf(f, " %s%s:%u%s", rep_dim(), x->file, x->line, rep_reset());
        else if (x->module && x->function != x->buf)
            fprintf(f, " %s(%s+0x%llx)%s", rep_dim(), base_name(x->module), (unsigned long long)x->offset,
                    rep_reset());
        if (x->build_id_differs)
            fprintf(f, " %s[build id differs: the file changed since the run]%s", rep_yellow(), rep_reset());
        fputc('\n', f);
        i++;
        /* Below a C program's main there is only the C library's start-up. */
        if (depth && !x->python && !strcmp(x->function, "main"))
            break;
    }
}

void site_json(json_t *j, const model_t *m, uint32_t site_id)
{
    site_frame_t fr[SITE_MAX_FRAMES];
    size_t n = site_frames(m, site_id, fr, SITE_MAX_FRAMES);
    json_u64(j, "site", site_id);
    json_arr(j, "frames");
    for (size_t i = 0; i < n; i++) {
        const site_frame_t *x = &fr[i];
        json_obj(j, NULL);
        json_str(j, "kind", x->python ? "python" : "native");
        json_str(j, "function", x->function);
        if (x->symbol)
            json_str(j, "symbol", x->symbol);
        if (x->file) {
            json_str(j, "file", x->file);
            json_u64(j, "line", x->line);
        }
        if (!x->python) {
            if (x->module)
                json_str(j, "module", x->module);
            json_u64(j, "offset", x->offset);
            if (x->build_id_differs)
                json_bool(j, "build_id_differs", 1);
        }
        json_obj_end(j);
    }
    json_arr_end(j);
}
