/* fake_mem.c — "device" memory of the fake CUDA runtime: host mappings laid out like a GPU's
 * (2 MiB-aligned mappings for large requests, 512-byte slots in shared 2 MiB chunks for small
 * ones), capacity accounting, and the malloc/free/memset/memcpy/pool/IPC/attribute calls. */
#include "fake_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct fk_region {              /* one mapping (a large allocation or a chunk) or a host block */
    char *base;
    size_t len;
    int device, type;
    struct fk_region *next_chunk;
    struct fk_alloc one;        /* FK_R_BIG / FK_R_HOST: the allocation itself */
    struct fk_alloc **slot;     /* FK_R_CHUNK: owner of each 512-byte slot */
    size_t nlive, nfree;
};

/* All regions, sorted by base address. */
static struct fk_region **fk_regions;
static size_t fk_nregions, fk_cap_regions;

static size_t region_floor(const void *p)     /* index of the last region with base <= p, +1 */
{
    size_t lo = 0, hi = fk_nregions;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)fk_regions[mid]->base <= (uintptr_t)p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct fk_region *region_find(const void *p)
{
    size_t i = region_floor(p);
    if (!i)
        return NULL;
    struct fk_region *r = fk_regions[i - 1];
    return (uintptr_t)p < (uintptr_t)r->base + r->len ? r : NULL;
}

static int region_insert(struct fk_region *r)
{
    if (fk_nregions == fk_cap_regions) {
        size_t cap = fk_cap_regions ? 2 * fk_cap_regions : 256;
        struct fk_region **v = realloc(fk_regions, cap * sizeof *v);
        if (!v)
            return -1;
        fk_regions = v;
        fk_cap_regions = cap;
    }
    size_t i = region_floor(r->base);
    memmove(&fk_regions[i + 1], &fk_regions[i], (fk_nregions - i) * sizeof *fk_regions);
    fk_regions[i] = r;
    fk_nregions++;
    return 0;
}

static void region_remove(struct fk_region *r)
{
    size_t i = region_floor(r->base) - 1;
    memmove(&fk_regions[i], &fk_regions[i + 1], (fk_nregions - i - 1) * sizeof *fk_regions);
    fk_nregions--;
}

struct fk_alloc *fk_find_alloc(const void *p)
{
    struct fk_region *r = region_find(p);
    if (!r)
        return NULL;
    if (r->type == FK_R_CHUNK)
        return r->slot[((uintptr_t)p - (uintptr_t)r->base) / FK_SLOT];
    return &r->one;
}

/* A live device allocation (not host memory) that starts at p. */
static struct fk_alloc *find_dev_start(const void *p)
{
    struct fk_alloc *a = fk_find_alloc(p);
    return a && a->base == p && a->kind != FK_M_HOST && !a->free_pending && a->region->type != FK_R_VMM ? a : NULL;
}

/* [p, p + n) lies inside one device (or managed) allocation, or in adjacent mappings. */
static int dev_range_ok(const void *p, size_t n)
{
    struct fk_alloc *a = fk_find_alloc(p);
    while (a && a->region->type == FK_R_VMM && n > (size_t)(a->base + a->size - (const char *)p)) {
        n -= (size_t)(a->base + a->size - (const char *)p);
        p = a->base + a->size;
        struct fk_alloc *next = fk_find_alloc(p);
        a = next && next->region->type == FK_R_VMM ? next : NULL;
    }
    return a && a->kind != FK_M_HOST && n <= (size_t)(a->base + a->size - (const char *)p);
}

/* n bytes (a multiple of 2 MiB), 2 MiB-aligned, reserving no swap. */
static char *map_aligned(size_t n)
{
    size_t span = n + FK_PAGE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)p + FK_PAGE - 1) & ~(uintptr_t)(FK_PAGE - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + span > a + n)
        munmap(a + n, (size_t)(p + span - (a + n)));
    return a;
}

void fk_make_context(int device)
{
    struct fk_device *d = &fk_dev[device];
    if (!d->context_made) {
        d->context_made = 1;
        d->st.bytes_in_use += d->context;
    }
}

int fk_charge(int device, size_t n)
{
    fk_make_context(device);
    struct fk_device *d = &fk_dev[device];
    size_t cap = d->capacity > d->others ? d->capacity - d->others : 0;
    if (d->st.bytes_in_use > cap || n > cap - d->st.bytes_in_use)
        return -1;
    d->st.bytes_in_use += n;
    if (d->st.bytes_in_use > d->st.peak_bytes)
        d->st.peak_bytes = d->st.bytes_in_use;
    return 0;
}

void fk_uncharge(int device, size_t n)
{
    fk_dev[device].st.bytes_in_use -= n;
}

static struct fk_region *new_region(int device, int type, char *base, size_t len);

struct fk_region *fk_region_new_vmm(int device, char *base, size_t len)
{
    struct fk_region *r = new_region(device, FK_R_VMM, base, len);
    if (r) {
        r->one.base = base;
        r->one.size = len;
        r->one.kind = FK_M_DEVICE;
    }
    return r;
}

void fk_region_free_vmm(struct fk_region *r)
{
    region_remove(r);
    free(r);
}

static struct fk_region *new_region(int device, int type, char *base, size_t len)
{
    struct fk_region *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->base = base;
    r->len = len;
    r->device = device;
    r->type = type;
    r->one.region = r;
    if ((type == FK_R_CHUNK && !(r->slot = calloc(FK_CHUNK_SLOTS, sizeof *r->slot))) ||
        region_insert(r) != 0) {
        free(r->slot);
        free(r);
        return NULL;
    }
    return r;
}

static cudaError_t alloc_big(int device, size_t n, int kind, void **out)
{
    if (n > SIZE_MAX - FK_PAGE)
        return cudaErrorMemoryAllocation;
    size_t len = (n + FK_PAGE - 1) & ~(FK_PAGE - 1);
    if (fk_charge(device, len) != 0)
        return cudaErrorMemoryAllocation;
    char *p = map_aligned(len);
    struct fk_region *r = p ? new_region(device, FK_R_BIG, p, len) : NULL;
    if (!r) {
        if (p)
            munmap(p, len);
        fk_dev[device].st.bytes_in_use -= len;
        return cudaErrorMemoryAllocation;
    }
    r->one.base = p;
    r->one.size = len;
    r->one.kind = kind;
    *out = p;
    return cudaSuccess;
}

static size_t find_run(const struct fk_region *r, size_t need)   /* first fit; SIZE_MAX: none */
{
    size_t run = 0;
    for (size_t i = 0; i < FK_CHUNK_SLOTS; i++) {
        run = r->slot[i] ? 0 : run + 1;
        if (run == need)
            return i + 1 - need;
    }
    return SIZE_MAX;
}

static cudaError_t alloc_small(int device, size_t n, int kind, void **out)
{
    struct fk_device *d = &fk_dev[device];
    size_t need = (n + FK_SLOT - 1) / FK_SLOT, at = SIZE_MAX;
    struct fk_region *r, **tail = &d->chunks;
    for (r = d->chunks; r; tail = &r->next_chunk, r = r->next_chunk)
        if (r->nfree >= need && (at = find_run(r, need)) != SIZE_MAX)
            break;
    if (!r) {
        if (fk_charge(device, FK_PAGE) != 0)
            return cudaErrorMemoryAllocation;
        char *p = map_aligned(FK_PAGE);
        r = p ? new_region(device, FK_R_CHUNK, p, FK_PAGE) : NULL;
        if (!r) {
            if (p)
                munmap(p, FK_PAGE);
            d->st.bytes_in_use -= FK_PAGE;
            return cudaErrorMemoryAllocation;
        }
        r->nfree = FK_CHUNK_SLOTS;
        *tail = r;
        at = 0;
    }
    struct fk_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return cudaErrorMemoryAllocation;    /* an empty new chunk stays for the next call */
    a->base = r->base + at * FK_SLOT;
    a->size = need * FK_SLOT;
    a->kind = kind;
    a->region = r;
    for (size_t i = at; i < at + need; i++)
        r->slot[i] = a;
    r->nlive++;
    r->nfree -= need;
    *out = a->base;
    return cudaSuccess;
}

cudaError_t fk_dev_alloc(int device, size_t n, int kind, void **out)
{
    return n >= FK_BIG_MIN ? alloc_big(device, n, kind, out) : alloc_small(device, n, kind, out);
}

void fk_dev_release(struct fk_alloc *a)
{
    struct fk_region *r = a->region;
    struct fk_device *d = &fk_dev[r->device];
    if (r->type == FK_R_CHUNK) {
        size_t first = (size_t)(a->base - r->base) / FK_SLOT, n = a->size / FK_SLOT;
        for (size_t i = first; i < first + n; i++)
            r->slot[i] = NULL;
        r->nfree += n;
        free(a);
        if (--r->nlive)
            return;
        for (struct fk_region **pp = &d->chunks; *pp; pp = &(*pp)->next_chunk)
            if (*pp == r) {
                *pp = r->next_chunk;
                break;
            }
    }
    region_remove(r);
    munmap(r->base, r->len);
    d->st.bytes_in_use -= r->len;
    free(r->slot);
    free(r);
}

void fk_free_ptr_if_live(void *p)
{
    struct fk_alloc *a = fk_find_alloc(p);
    if (a && a->base == p && a->kind != FK_M_HOST && a->region->type != FK_R_VMM)
        fk_dev_release(a);
}

void fk_device_reset_memory(int device)
{
    size_t n = 0;
    struct fk_alloc **v = NULL;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (size_t i = 0; i < fk_nregions; i++) {
            struct fk_region *r = fk_regions[i];
            if (r->device != device || r->type == FK_R_HOST || r->type == FK_R_VMM)
                continue;
            if (r->type == FK_R_BIG) {
                if (v)
                    v[n] = &r->one;
                n++;
                continue;
            }
            for (size_t s = 0; s < FK_CHUNK_SLOTS; s++)
                if (r->slot[s] && r->slot[s]->base == r->base + s * FK_SLOT) {
                    if (v)
                        v[n] = r->slot[s];
                    n++;
                }
        }
        if (!v && !(v = calloc(n ? n : 1, sizeof *v)))
            return;
    }
    for (size_t i = 0; i < n; i++)
        fk_dev_release(v[i]);
    free(v);
    fk_vmm_reset(device);
    fk_dev[device].st.bytes_in_use = 0;
    fk_dev[device].context_made = 0; /* the reset destroyed the context */
}

/* ---- cudaMalloc / cudaFree and relatives ------------------------------------------------- */
cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    if (!devPtr)
        return fk_leave(cudaErrorInvalidValue);
    if (!size) {
        *devPtr = NULL;
        return fk_leave(cudaSuccess);
    }
    if (fk_fail_mallocs > 0) {
        fk_fail_mallocs--;
        return fk_leave(cudaErrorMemoryAllocation);
    }
    if ((err = fk_dev_alloc(fk_cur_dev, size, FK_M_DEVICE, devPtr)) == cudaSuccess)
        fk_dev[fk_cur_dev].st.mallocs++;
    return fk_leave(err);
}

cudaError_t cudaFree(void *devPtr)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err || !devPtr)
        return fk_leave(err);
    if (!find_dev_start(devPtr))
        return fk_leave(cudaErrorInvalidValue);
    fk_wait_streams(-1);                 /* the real cudaFree synchronizes */
    struct fk_alloc *a = find_dev_start(devPtr);   /* another thread may have won the race */
    if (!a)
        return fk_leave(cudaErrorInvalidValue);
    fk_dev[a->region->device].st.frees++;
    fk_dev_release(a);
    return fk_leave(cudaSuccess);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    FK_ENTER();
    struct fk_device *d = &fk_dev[fk_cur_dev];
    fk_make_context(fk_cur_dev);
    size_t used = d->st.bytes_in_use + d->others;
    if (free_bytes)
        *free_bytes = d->capacity > used ? d->capacity - used : 0;
    if (total)
        *total = d->capacity;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    if (!devPtr || !size || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return fk_leave(cudaErrorInvalidValue);
    if ((err = fk_dev_alloc(fk_cur_dev, size, FK_M_MANAGED, devPtr)) == cudaSuccess)
        fk_dev[fk_cur_dev].st.managed_allocs++;
    return fk_leave(err);
}

/* cudaMallocPitch / cudaMalloc3D: rows padded to 512 bytes. */
static cudaError_t pitched_alloc(void **ptr, size_t *pitch, size_t w, size_t h, size_t depth)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    if (!ptr || !pitch)
        return fk_leave(cudaErrorInvalidValue);
    size_t pw = w > SIZE_MAX - FK_SLOT ? 0 : (w + FK_SLOT - 1) & ~(FK_SLOT - 1), size;
    if ((w && !pw) || __builtin_mul_overflow(pw, h, &size) ||
        __builtin_mul_overflow(size, depth, &size))
        return fk_leave(cudaErrorMemoryAllocation);
    *pitch = pw;
    if (!size) {
        *ptr = NULL;
        return fk_leave(cudaSuccess);
    }
    if ((err = fk_dev_alloc(fk_cur_dev, size, FK_M_DEVICE, ptr)) == cudaSuccess)
        fk_dev[fk_cur_dev].st.mallocs++;
    return fk_leave(err);
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    return pitched_alloc(devPtr, pitch, width, height, 1);
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    if (!pitchedDevPtr)
        return pitched_alloc(NULL, NULL, 0, 0, 0);   /* reports InvalidValue the usual way */
    void *p = NULL;
    size_t pitch = 0;
    cudaError_t err = pitched_alloc(&p, &pitch, extent.width, extent.height, extent.depth);
    if (err == cudaSuccess) {
        pitchedDevPtr->ptr = p;
        pitchedDevPtr->pitch = pitch;
        pitchedDevPtr->xsize = extent.width;
        pitchedDevPtr->ysize = extent.height;
    }
    return err;
}

/* ---- pinned host memory ----------------------------------------------------------------- */
static cudaError_t host_alloc(void **ptr, size_t size)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    if (!ptr)
        return fk_leave(cudaErrorInvalidValue);
    if (!size) {
        *ptr = NULL;
        return fk_leave(cudaSuccess);
    }
    void *p = NULL;
    if (posix_memalign(&p, 4096, size) != 0)
        return fk_leave(cudaErrorMemoryAllocation);
    struct fk_region *r = new_region(fk_cur_dev, FK_R_HOST, p, size);
    if (!r) {
        free(p);
        return fk_leave(cudaErrorMemoryAllocation);
    }
    r->one.base = p;
    r->one.size = size;
    r->one.kind = FK_M_HOST;
    fk_dev[fk_cur_dev].st.host_allocs++;
    *ptr = p;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return host_alloc(ptr, size); }

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    return host_alloc(pHost, size);
}

static struct fk_region *find_host_start(const void *p)
{
    struct fk_region *r = region_find(p);
    return r && r->type == FK_R_HOST && r->base == p ? r : NULL;
}

cudaError_t cudaFreeHost(void *ptr)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err || !ptr)
        return fk_leave(err);
    if (!find_host_start(ptr))
        return fk_leave(cudaErrorInvalidValue);
    fk_wait_streams(-1);          /* queued copies may still read it */
    struct fk_region *r = find_host_start(ptr);
    if (!r)
        return fk_leave(cudaErrorInvalidValue);
    region_remove(r);
    free(r->base);
    free(r);
    return fk_leave(cudaSuccess);
}

/* ---- stream-ordered allocation ---------------------------------------------------------- */
static int pool_device(cudaMemPool_t pool)
{
    for (int i = 0; i < fk_ndev; i++)
        if (pool == &fk_dev[i].pool)
            return i;
    return -1;
}

/* from_pool: allocate on memPool's device, else on the stream's. */
static cudaError_t malloc_async(void **ptr, size_t size, int from_pool, cudaMemPool_t pool,
                                cudaStream_t h, int ptsz)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    if (!ptr)
        return fk_leave(cudaErrorInvalidValue);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    int dev = s->device;
    if (from_pool && (dev = pool_device(pool)) < 0)
        return fk_leave(cudaErrorInvalidValue);
    if (s->capture && s->capture->invalidated)
        return fk_leave(cudaErrorStreamCaptureInvalidated);
    if (!size) {
        *ptr = NULL;
        return fk_leave(cudaSuccess);
    }
    if ((err = fk_dev_alloc(dev, size, FK_M_ASYNC, ptr)) != cudaSuccess)
        return fk_leave(err);
    fk_dev[dev].st.async_mallocs++;
    if (s->capture) {
        struct fk_node n = {.kind = FK_OP_MALLOC, .ptr = *ptr};
        fk_capture_add_alloc(s->capture, *ptr);
        fk_graph_append(s->capture->graph, &n);
    }
    return fk_leave(cudaSuccess);
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, 0, NULL, hStream, 0);
}
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, 0, NULL, hStream, 1);
}
cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream)
{
    return malloc_async(ptr, size, 1, memPool, stream, 0);
}
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream)
{
    return malloc_async(ptr, size, 1, memPool, stream, 1);
}

static cudaError_t free_async(void *p, cudaStream_t h, int ptsz)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    if (!p)
        return fk_leave(cudaSuccess);
    struct fk_alloc *a = find_dev_start(p);
    if (!a)
        return fk_leave(cudaErrorInvalidValue);
    struct fk_node n = {.kind = FK_OP_FREE, .ptr = p};
    if (s->capture) {
        if (s->capture->invalidated)
            return fk_leave(cudaErrorStreamCaptureInvalidated);
        if (fk_capture_take_free(s->capture, p))
            a->free_pending = 1;       /* the graph owns it from now on */
        else
            fk_graph_append(s->capture->graph, &n);
    } else {
        if ((err = fk_submit(s, &n, NULL)) != cudaSuccess)
            return fk_leave(err);
        a->free_pending = 1;
    }
    fk_dev[a->region->device].st.async_frees++;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, 0);
}
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, 1);
}

/* ---- memory pools: one default pool per device, attributes mostly ignored ---------------- */
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    FK_ENTER();
    if (!memPool)
        return fk_leave(cudaErrorInvalidValue);
    if (device < 0 || device >= fk_ndev)
        return fk_leave(cudaErrorInvalidDevice);
    *memPool = &fk_dev[device].pool;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    FK_ENTER();
    if (!value || pool_device(memPool) < 0)
        return fk_leave(cudaErrorInvalidValue);
    if (attr == cudaMemPoolAttrReleaseThreshold)
        memPool->release_threshold = *(unsigned long long *)value;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    FK_ENTER();
    if (!value || pool_device(memPool) < 0)
        return fk_leave(cudaErrorInvalidValue);
    switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
        *(unsigned long long *)value = memPool->release_threshold;
        break;
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
        *(int *)value = 1;
        break;
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemCurrent:
    case cudaMemPoolAttrUsedMemHigh:
        *(unsigned long long *)value = 0;
        break;
    default:
        break;
    }
    return fk_leave(cudaSuccess);
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    FK_ENTER();
    return fk_leave(pool_device(memPool) < 0 ? cudaErrorInvalidValue : cudaSuccess);
}

/* ---- pointer queries --------------------------------------------------------------------- */
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    FK_ENTER();
    struct fk_alloc *a = fk_find_alloc(devPtr);
    if (!handle || !a || a->kind == FK_M_HOST || a->kind == FK_M_MANAGED || a->region->type == FK_R_VMM)
        return fk_leave(cudaErrorInvalidValue);
    int dev = a->region->device;
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &a->base, sizeof a->base);      /* bytes 0-7: allocation base */
    memcpy(handle->reserved + 8, &a->size, sizeof a->size);  /* bytes 8-15: its size */
    memcpy(handle->reserved + 16, &dev, sizeof dev);         /* bytes 16-19: its device */
    return fk_leave(cudaSuccess);
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    FK_ENTER();
    if (!attributes)
        return fk_leave(cudaErrorInvalidValue);
    memset(attributes, 0, sizeof *attributes);
    struct fk_alloc *a = fk_find_alloc(ptr);
    if (!a) {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
        attributes->hostPointer = (void *)ptr;
    } else if (a->kind == FK_M_HOST) {
        attributes->type = cudaMemoryTypeHost;
        attributes->device = a->region->device;
        attributes->devicePointer = attributes->hostPointer = (void *)ptr;
    } else {
        attributes->type = a->kind == FK_M_MANAGED ? cudaMemoryTypeManaged : cudaMemoryTypeDevice;
        attributes->device = a->region->device;
        attributes->devicePointer = (void *)ptr;
        if (a->kind == FK_M_MANAGED)
            attributes->hostPointer = (void *)ptr;
    }
    return fk_leave(cudaSuccess);
}

/* ---- memset / memcpy ---------------------------------------------------------------------- */
static cudaError_t check_copy(const struct fk_node *n, enum cudaMemcpyKind kind)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    if (!n->bytes)
        return cudaSuccess;
    if (!n->dst || !n->src)
        return cudaErrorInvalidValue;
    if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) &&
        !dev_range_ok(n->dst, n->bytes))
        return cudaErrorInvalidValue;
    if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) &&
        !dev_range_ok(n->src, n->bytes))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* Queues a memset/memcpy on stream h; sync: a prohibited-during-capture call that waits. */
static cudaError_t memop(const struct fk_node *n, enum cudaMemcpyKind kind, cudaStream_t h,
                         int ptsz, int sync)
{
    FK_ENTER();
    cudaError_t err = sync ? fk_check_unsafe() : cudaSuccess;
    if (err)
        return fk_leave(err);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    if (n->kind == FK_OP_MEMCPY)
        err = check_copy(n, kind);
    else if (n->bytes && !dev_range_ok(n->dst, n->bytes))
        err = cudaErrorInvalidValue;
    if (err || !n->bytes)
        return fk_leave(err);
    if (sync && s->capture) {
        fk_capture_invalidate(s->capture);
        return fk_leave(cudaErrorStreamCaptureUnsupported);
    }
    if ((err = fk_submit(s, n, NULL)) != cudaSuccess)
        return fk_leave(err);
    if (sync) {
        struct fk_dep d = {s, s->id, s->enqueued};
        fk_wait_dep(&d);
    }
    return fk_leave(cudaSuccess);
}

#define MEMSET_NODE(p, v, c) (&(struct fk_node){.kind = FK_OP_MEMSET, .dst = (p), .value = (v), .bytes = (c)})
#define MEMCPY_NODE(d, s, c) (&(struct fk_node){.kind = FK_OP_MEMCPY, .dst = (d), .src = (s), .bytes = (c)})

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    return memop(MEMSET_NODE(devPtr, value, count), cudaMemcpyDefault, NULL, 0, 1);
}
cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return memop(MEMSET_NODE(devPtr, value, count), cudaMemcpyDefault, NULL, 1, 1);
}
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return memop(MEMSET_NODE(devPtr, value, count), cudaMemcpyDefault, stream, 0, 0);
}
cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return memop(MEMSET_NODE(devPtr, value, count), cudaMemcpyDefault, stream, 1, 0);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return memop(MEMCPY_NODE(dst, src, count), kind, NULL, 0, 1);
}
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return memop(MEMCPY_NODE(dst, src, count), kind, NULL, 1, 1);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    return memop(MEMCPY_NODE(dst, src, count), kind, stream, 0, 0);
}
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                 enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memop(MEMCPY_NODE(dst, src, count), kind, stream, 1, 0);
}
