/* One side of `gmshim diff`: a log replayed once with sites and epochs, and once per device up to
 * its peak of reserved memory, then reduced to the figures the runs are compared by. Every figure
 * is the model's (peaks, fragmentation, OOM causes, site growth as `leaks` reports it); nothing
 * here computes one of them a second way. */
#include "diff_side.h"
#include "oom_classify.h"
#include "sites.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void *diff_side_alloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fputs("gmshim: out of memory\n", stderr);
        exit(2); /* diff's "cannot compare": its 1 means a gated figure rose */
    }
    return p;
}

static char *diff_side_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(diff_side_alloc(n), s, n);
}

static const char *diff_side_base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The key of a site: the innermost Python frame, else the innermost native frame with a source
 * line, else the label the reports print. */
static void diff_side_key(const model_t *m, uint32_t site, diff_site_t *out)
{
    site_frame_t fr[SITE_MAX_FRAMES];
    size_t n = site_frames(m, site, fr, SITE_MAX_FRAMES);
    const site_frame_t *pick = NULL;
    for (size_t i = 0; i < n && !pick; i++)
        if (fr[i].python)
            pick = &fr[i];
    for (size_t i = 0; i < n && !pick; i++)
        if (fr[i].file)
            pick = &fr[i];
    char buf[512];
    if (pick) {
        snprintf(buf, sizeof buf, "%s (%s:%u)", pick->function, diff_side_base(pick->file), pick->line);
        out->file = diff_side_strdup(pick->file);
        out->function = diff_side_strdup(pick->function);
        out->line = pick->line;
    } else {
        site_label(m, site, buf, sizeof buf);
    }
    out->key = diff_side_strdup(buf);
}

static int diff_side_by_key(const void *a, const void *b)
{
    return strcmp(((const diff_site_t *)a)->key, ((const diff_site_t *)b)->key);
}

static void diff_side_site_free(diff_site_t *x)
{
    free(x->key);
    free(x->file);
    free(x->function);
}

/* The device's sites with bytes live at the peak (from `peak`, the replay stopped there) or a
 * growth (from the whole run's `m`), keyed, sorted and summed by key. */
static void diff_side_sites(diff_dev_t *d, const model_t *m, const model_t *peak)
{
    size_t cap = m->nsst + (peak ? peak->nsst : 0), n = 0;
    diff_site_t *v = diff_side_alloc(cap * sizeof *v);
    int sys = d->epochs;
    for (size_t i = 1; i < m->nsst; i++) {
        const model_sstat_t *s = &m->sst[i];
        if (s->dev != d->id || sys < 0)
            continue;
        uint64_t per = model_site_rate(m, s, sys); /* leaks' figure */
        if (!per)
            continue;
        diff_side_key(m, s->site, &v[n]);
        v[n++].growth = per;
    }
    for (size_t i = 1; peak && i < peak->nsst; i++) {
        const model_sstat_t *s = &peak->sst[i];
        if (s->dev != d->id || !s->live_req)
            continue;
        diff_side_key(m, s->site, &v[n]);
        v[n++].peak_bytes = s->live_req;
    }
    qsort(v, n, sizeof *v, diff_side_by_key);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && !strcmp(v[k - 1].key, v[i].key)) {
            v[k - 1].peak_bytes += v[i].peak_bytes;
            v[k - 1].growth += v[i].growth;
            diff_side_site_free(&v[i]);
        } else {
            v[k++] = v[i];
        }
    }
    d->sites = v;
    d->nsites = k;
}

/* The device's figures; `lf` replayed again up to its peak for the bytes then. */
static void diff_side_dev_fill(diff_dev_t *d, const model_t *m, rd_log_t *lf, const model_dev_t *md)
{
    snprintf(d->name, sizeof d->name, "%s", md->name);
    d->peak_allocated = md->peak_allocated;
    d->peak_reserved = md->peak_reserved;
    d->ooms = md->ooms;
    d->epochs = model_epoch_system(m, d->id, 3);
    d->by_steps = d->epochs == EPOCH_TROUGHS && md->step.period;
    d->steps = d->epochs >= 0 ? md->epoch[d->epochs] : 0;
    if (d->epochs >= 0) {
        model_series_t lw = model_dev_series(m, md, d->epochs);
        d->low_water = lw.n ? lw.last : 0;
    }
    for (size_t i = 0; i < m->nooms; i++) {
        if (m->ooms[i].dev != d->id)
            continue;
        oom_verdict_t v;
        oom_classify(m, &m->ooms[i], &v);
        snprintf(d->first_cause, sizeof d->first_cause, "%s", oom_cause_name(v.cause));
        break;
    }
    model_t *peak = NULL;
    if (md->peak_reserved) {
        peak = diff_side_alloc(sizeof *peak);
        model_build_until(peak, lf, MODEL_SITES, md->peak_seq + 1, 0, NULL);
        model_frag_t f;
        model_frag_now(peak, d->id, &f);
        d->floor = f.allocated;
        d->frag = f.external;
    }
    diff_side_sites(d, m, peak);
    if (peak) {
        model_free(peak);
        free(peak);
    }
}

int diff_side_read(diff_side_t *s, const char *path, FILE *err)
{
    memset(s, 0, sizeof *s);
    s->rank = -1;
    rd_log_t *lf = diff_side_alloc(sizeof *lf);
    if (rd_open_path(lf, path) != 0) {
        fprintf(err, "gmshim: %s: byte %" PRIu64 ": %s\n", path, lf->diags[0].offset, lf->diags[0].msg);
        rd_close(lf);
        free(lf);
        return -1;
    }
    model_t *m = diff_side_alloc(sizeof *m);
    model_build(m, lf, MODEL_SITES | MODEL_EPOCHS);
    s->path = diff_side_strdup(path);
    s->rank = model_rank(m);
    s->devs = diff_side_alloc((size_t)(m->ndev ? m->ndev : 1) * sizeof *s->devs);
    for (int i = 0; i < m->ndev; i++) {
        if (!m->dev[i])
            continue;
        diff_dev_t *d = &s->devs[s->ndevs++];
        d->id = i;
        diff_side_dev_fill(d, m, lf, m->dev[i]);
    }
    s->partial = lf->partial;
    size_t shown = lf->ndiags < RD_MAX_DIAGS ? lf->ndiags : RD_MAX_DIAGS;
    for (size_t i = 0; i < shown; i++)
        fprintf(err, "gmshim: %s: byte %" PRIu64 ": %s\n", path, lf->diags[i].offset, lf->diags[i].msg);
    model_free(m);
    free(m);
    rd_close(lf);
    free(lf);
    return s->partial ? 1 : 0;
}

void diff_side_free(diff_side_t *s)
{
    for (int i = 0; i < s->ndevs; i++) {
        for (size_t k = 0; k < s->devs[i].nsites; k++)
            diff_side_site_free(&s->devs[i].sites[k]);
        free(s->devs[i].sites);
    }
    free(s->devs);
    free(s->path);
    memset(s, 0, sizeof *s);
}

const diff_dev_t *diff_side_dev(const diff_side_t *s, int id)
{
    for (int i = 0; i < s->ndevs; i++)
        if (s->devs[i].id == id)
            return &s->devs[i];
    return NULL;
}
