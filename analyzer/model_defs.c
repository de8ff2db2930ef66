/* The definitions a log carries — call sites, strings, modules — by id, and the statistics of
 * each (device, site): the tables the reports name things with. A record's counted tail is
 * checked before it is copied. */
#include "model_int.h"
#include "vec.h"

#include <stdio.h>

/* The statistics of (dev, site), made when new with its epochs starting at `epoch`. */
uint32_t model_sstat_index_at(model_t *m, unsigned dev, uint32_t site, const uint32_t *epoch)
{
    uint64_t key = (uint64_t)dev << 32 | site | (1ull << 40);
    uint64_t *c = m->sst_cache[(site ^ site >> 8 ^ dev) & 255];
    if (c[0] == key)
        return (uint32_t)c[1];
    uint64_t *v = map_find(&m->sstmap, key);
    if (v) {
        c[0] = key, c[1] = *v;
        return (uint32_t)*v;
    }
    if (m->nsst >= UINT32_MAX - 1)
        return 0;
    model_sstat_t *n = vec_grow(m->sst, &m->capsst, m->nsst + 1, sizeof *n, 16);
    if (!n)
        model_die_oom();
    m->sst = n;
    uint32_t idx = (uint32_t)m->nsst++;
    model_sstat_t *s = &m->sst[idx];
    memset(s, 0, sizeof *s);
    s->site = site;
    s->dev = (uint8_t)dev;
    for (int sys = 0; sys < 2; sys++)
        s->acc_epoch[sys] = epoch[sys];
    map_put(&m->sstmap, key, idx);
    return idx;
}

const model_sitedef_t *model_site(const model_t *m, uint32_t id)
{
    uint64_t *v = map_find(&m->sitemap, (uint64_t)id | (1ull << 40));
    return v ? &m->sites[*v] : NULL;
}

const char *model_string(const model_t *m, uint32_t id)
{
    uint64_t *v = map_find(&m->strmap, (uint64_t)id | (1ull << 40));
    return v ? m->strings[*v] : NULL;
}

const model_module_t *model_module(const model_t *m, uint32_t id)
{
    for (size_t i = 0; i < m->nmodules; i++)
        if (m->modules[i].id == id)
            return &m->modules[i];
    return NULL;
}


void model_on_site(model_t *m, const rd_rec_t *r)
{
    const uint64_t *native;
    const gmlog_pyframe_t *py;
    unsigned nn, np;
    if (rd_site_frames(r, &native, &nn, &py, &np)) {
        m->malformed++;
        rd_diag(m->lf, r->off, 1, "a site record's %u native and %u Python frames do not fit in its %u bytes",
                ((const gmlog_site_t *)r->p)->native, ((const gmlog_site_t *)r->p)->python, r->len);
        return;
    }
    uint32_t id = ((const gmlog_site_t *)r->p)->id;
    if (model_site(m, id))
        return;
    model_sitedef_t *n = vec_grow(m->sites, &m->capsites, m->nsites + 1, sizeof *n, 16);
    if (!n)
        model_die_oom();
    m->sites = n;
    model_sitedef_t *s = &m->sites[m->nsites];
    s->id = id;
    s->nnative = (uint16_t)nn;
    s->npy = (uint16_t)np;
    s->native = nn ? malloc(nn * sizeof *s->native) : NULL;
    s->py = np ? malloc(np * sizeof *s->py) : NULL;
    if ((nn && !s->native) || (np && !s->py))
        model_die_oom();
    if (nn)
        memcpy(s->native, native, nn * sizeof *s->native);
    if (np)
        memcpy(s->py, py, np * sizeof *s->py);
    map_put(&m->sitemap, (uint64_t)id | (1ull << 40), m->nsites);
    m->nsites++;
}

char *model_dup_text(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        model_die_oom();
    memcpy(s, p, n);
    s[n] = 0;
    for (size_t i = 0; i < n; i++) /* a label or name is text: control bytes become '?' */
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
            s[i] = '?';
    return s;
}

void model_on_string(model_t *m, const rd_rec_t *r)
{
    const gmlog_string_t *s = (const gmlog_string_t *)r->p;
    const char *bytes;
    if (rd_tail_bytes(r, sizeof *s, s->len, &bytes)) {
        m->malformed++;
        rd_diag(m->lf, r->off, 1, "a string record of %u bytes does not fit in its %u bytes", s->len, r->len);
        return;
    }
    if (model_string(m, s->id))
        return;
    char **n = vec_grow(m->strings, &m->capstrings, m->nstrings + 1, sizeof *n, 16);
    if (!n)
        model_die_oom();
    m->strings = n;
    m->strings[m->nstrings] = model_dup_text(bytes, s->len);
    map_put(&m->strmap, (uint64_t)s->id | (1ull << 40), m->nstrings);
    m->nstrings++;
}

void model_on_module(model_t *m, const rd_rec_t *r)
{
    const gmlog_module_t *mo = (const gmlog_module_t *)r->p;
    const char *bytes;
    if (rd_tail_bytes(r, sizeof *mo, (size_t)mo->build_id_len + mo->path_len, &bytes)) {
        m->malformed++;
        rd_diag(m->lf, r->off, 1, "a module record's build id and path do not fit in its %u bytes", r->len);
        return;
    }
    if (model_module(m, mo->id))
        return;
    model_module_t *n = vec_grow(m->modules, &m->capmodules, m->nmodules + 1, sizeof *n, 16);
    if (!n)
        model_die_oom();
    m->modules = n;
    model_module_t *x = &m->modules[m->nmodules++];
    x->id = mo->id;
    x->base = mo->base;
    x->start = mo->start;
    x->end = mo->end;
    x->build_id_len = mo->build_id_len > sizeof x->build_id ? sizeof x->build_id : mo->build_id_len;
    memcpy(x->build_id, bytes, x->build_id_len);
    x->path = model_dup_text(bytes + mo->build_id_len, mo->path_len);
}

void model_release_site(model_t *m, uint32_t sidx, uint64_t block, uint64_t req, const uint32_t *epoch)
{
    model_sstat_t *s = &m->sst[sidx];
    sstat_sync_at(s, epoch);
    s->live_req -= req <= s->live_req ? req : s->live_req;
    s->live_blk -= block <= s->live_blk ? block : s->live_blk;
    if (s->live_count)
        s->live_count--;
    for (int sys = 0; sys < 2; sys++)
        if (s->live_req < s->ep_min[sys])
            s->ep_min[sys] = s->live_req;
}
