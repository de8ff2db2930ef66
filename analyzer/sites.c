/* Rendering of call sites for the reports. Native frames are symbolized through symbolize.c
 * (cached per module); Python frames come from the log's strings. Nothing here trusts that a
 * site, string or module id in the log was ever defined. */
#include "sites.h"
#include "output.h"
#include "symbolize.h"

#include <string.h>

static const char *base_name(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "?";
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

static int boring_module(const char *path)
{
    const char *b = base_name(path);
    return !strncmp(b, "libcudart", 9) || !strncmp(b, "libgmshim", 9) || !strncmp(b, "libc.so", 7) ||
           !strncmp(b, "libc-", 5) || !strncmp(b, "libcuda.so", 10) || !strncmp(b, "libcupti", 8);
}

const char *site_label(const model_t *m, uint32_t site_id, char *buf, size_t len)
{
    site_frame_t fr[SITE_MAX_FRAMES];
    size_t n = site_frames(m, site_id, fr, SITE_MAX_FRAMES);
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
    if (pick->file)
        snprintf(buf, len, "%s (%s:%u)", pick->function, base_name(pick->file), pick->line);
    else if (pick->module && pick->function != pick->buf)
        snprintf(buf, len, "%s (%s)", pick->function, base_name(pick->module));
    else
        snprintf(buf, len, "%s", pick->function);
    return buf;
}

void site_print(FILE *f, const model_t *m, uint32_t site_id, const char *indent, unsigned depth)
{
    site_frame_t fr[SITE_MAX_FRAMES];
    size_t n = site_frames(m, site_id, fr, SITE_MAX_FRAMES);
    if (!n) {
        fprintf(f, "%s%s(no stack: %s)%s\n", indent, rep_dim(),
                site_id ? "site not defined in the log" : "set GMSHIM_STACK_DEPTH", rep_reset());
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (depth && i >= depth) {
            fprintf(f, "%s%s... %zu more frames%s\n", indent, rep_dim(), n - i, rep_reset());
            break;
        }
        const site_frame_t *x = &fr[i];
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
