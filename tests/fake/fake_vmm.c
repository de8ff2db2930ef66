/* fake_vmm.c — the driver's virtual memory calls (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressFree, cuMemGetAllocationGranularity) with
 * the real granularity rules: 2 MiB for sizes, offsets and addresses; a mapping only inside a
 * reserved range, never over another; an unmap of whole mappings only; no access before
 * cuMemSetAccess; a handle's memory counted
 * against the device's capacity from cuMemCreate until it is released and unmapped; a range freed
 * only whole and unmapped. A handle holds no contents of its own: a mapping starts zeroed (the
 * pool never maps a handle twice). FAKECUDA_NO_VMM=1: the device says it lacks the API.
 * Exported from libcudart beside the runtime, where the shim looks for the driver's functions. */
#include "fake_internal.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GRAN FK_PAGE

struct fk_handle {
    struct fk_handle *prev, *next;  /* every live handle, for a device reset */
    int device;
    size_t size;
    int maps, released;
};

static struct fk_handle *handles;

struct fk_range {               /* a reservation; pages[i]: the handle mapped there, or NULL */
    struct fk_range *next;
    char *base;
    size_t size;
    int device;
    struct fk_handle **pages;
    struct fk_region **regions; /* each mapped page's region */
    uint16_t *access;           /* each page: the devices given read-write access, one bit each */
};

static struct fk_range *ranges;

static int vmm_off(void)
{
    const char *e = getenv("FAKECUDA_NO_VMM");
    return e && *e && *e != '0';
}

/* FAKECUDA_VMM_MAP_REFUSE=N: cuMemMap succeeds N times, then refuses every mapping with
 * CUDA_ERROR_NOT_PERMITTED, as a driver that offers the API and will not map (a restricted
 * virtual GPU) might. Read under fk_mu. */
static int map_refused(void)
{
    static long maps;
    const char *e = getenv("FAKECUDA_VMM_MAP_REFUSE");
    return e && *e && maps++ >= strtol(e, NULL, 10);
}

static CUresult enter(void)
{
    if (fk_enter() != cudaSuccess)
        return CUDA_ERROR_NOT_INITIALIZED;
    return CUDA_SUCCESS;
}

static CUresult leave(CUresult r)
{
    pthread_mutex_unlock(&fk_mu);
    return r;
}

static struct fk_range *range_of(CUdeviceptr p, size_t n)
{
    for (struct fk_range *r = ranges; r; r = r->next)
        if ((char *)p >= r->base && n <= r->size && (size_t)((char *)p - r->base) <= r->size - n)
            return r;
    return NULL;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult e = enter();
    if (e)
        return e;
    if (!pi || dev < 0 || dev >= fk_ndev)
        return leave(CUDA_ERROR_INVALID_VALUE);
    *pi = attrib == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? !vmm_off() : 0;
    return leave(CUDA_SUCCESS);
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
    CUresult e = enter();
    if (e)
        return e;
    if (!can || dev < 0 || dev >= fk_ndev || peer < 0 || peer >= fk_ndev)
        return leave(CUDA_ERROR_INVALID_DEVICE);
    *can = dev != peer;
    return leave(CUDA_SUCCESS);
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags o)
{
    (void)o;
    if (!g || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    *g = GRAN;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)
{
    (void)addr;
    CUresult e = enter();
    if (e)
        return e;
    if (!ptr || !size || size % GRAN || (alignment && alignment % GRAN) || flags || vmm_off())
        return leave(CUDA_ERROR_INVALID_VALUE);
    size_t span = size + GRAN;
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    struct fk_range *r = calloc(1, sizeof *r);
    if (p == MAP_FAILED || !r) {
        if (p != MAP_FAILED)
            munmap(p, span);
        free(r);
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    char *a = (char *)(((uintptr_t)p + GRAN - 1) & ~(uintptr_t)(GRAN - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + span > a + size)
        munmap(a + size, (size_t)(p + span - (a + size)));
    r->base = a;
    r->size = size;
    r->device = fk_cur_dev;
    r->pages = calloc(size / GRAN, sizeof *r->pages);
    r->regions = calloc(size / GRAN, sizeof *r->regions);
    r->access = calloc(size / GRAN, sizeof *r->access);
    if (!r->pages || !r->regions || !r->access) {
        munmap(a, size);
        free(r->pages);
        free(r->regions);
        free(r->access);
        free(r);
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    r->next = ranges;
    ranges = r;
    *ptr = (CUdeviceptr)a;
    return leave(CUDA_SUCCESS);
}

static void range_drop(struct fk_range **link)
{
    struct fk_range *r = *link;
    *link = r->next;
    munmap(r->base, r->size);
    free(r->pages);
    free(r->regions);
    free(r->access);
    free(r);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult e = enter();
    if (e)
        return e;
    for (struct fk_range **link = &ranges; *link; link = &(*link)->next) {
        struct fk_range *r = *link;
        if (r->base != (char *)ptr)
            continue;
        if (r->size != size)
            return leave(CUDA_ERROR_INVALID_VALUE);
        for (size_t i = 0; i < size / GRAN; i++)
            if (r->pages[i])
                return leave(CUDA_ERROR_INVALID_VALUE); /* still mapped */
        range_drop(link);
        return leave(CUDA_SUCCESS);
    }
    return leave(CUDA_ERROR_INVALID_VALUE);
}

static void handle_put(struct fk_handle *h)
{
    if (h->released && !h->maps) {
        if (h->prev)
            h->prev->next = h->next;
        else
            handles = h->next;
        if (h->next)
            h->next->prev = h->prev;
        fk_uncharge(h->device, h->size);
        free(h);
    }
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    CUresult e = enter();
    if (e)
        return e;
    if (!handle || !prop || flags || !size || size % GRAN || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 || prop->location.id >= fk_ndev)
        return leave(CUDA_ERROR_INVALID_VALUE);
    if (fk_fail_mallocs > 0) {
        fk_fail_mallocs--;
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    struct fk_handle *h = calloc(1, sizeof *h);
    if (!h)
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    if (fk_charge(prop->location.id, size) != 0) {
        free(h);
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    h->device = prop->location.id;
    h->size = size;
    h->next = handles;
    if (handles)
        handles->prev = h;
    handles = h;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return leave(CUDA_SUCCESS);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult e = enter();
    if (e)
        return e;
    struct fk_handle *h = (struct fk_handle *)(uintptr_t)handle;
    if (!h || h->released)
        return leave(CUDA_ERROR_INVALID_VALUE);
    h->released = 1; /* its memory goes once its last mapping does */
    handle_put(h);
    return leave(CUDA_SUCCESS);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CUresult e = enter();
    if (e)
        return e;
    struct fk_handle *h = (struct fk_handle *)(uintptr_t)handle;
    struct fk_range *r = range_of(ptr, size);
    if (!h || h->released || !r || flags || !size || ptr % GRAN || size % GRAN || offset % GRAN ||
        offset > h->size || size > h->size - offset)
        return leave(CUDA_ERROR_INVALID_VALUE);
    if (map_refused())
        return leave(CUDA_ERROR_NOT_PERMITTED);
    size_t first = (size_t)((char *)ptr - r->base) / GRAN, n = size / GRAN;
    for (size_t i = first; i < first + n; i++)
        if (r->pages[i])
            return leave(CUDA_ERROR_INVALID_VALUE); /* already mapped */
    if (mmap((void *)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
        MAP_FAILED)
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    for (size_t i = first; i < first + n; i++) {  /* one region a page: any page range unmaps */
        if (!(r->regions[i] = fk_region_new_vmm(h->device, r->base + i * GRAN, GRAN))) {
            while (i-- > first) {
                fk_region_free_vmm(r->regions[i]);
                r->regions[i] = NULL;
            }
            return leave(CUDA_ERROR_OUT_OF_MEMORY);
        }
        r->pages[i] = h;
        h->maps++;
    }
    return leave(CUDA_SUCCESS);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult e = enter();
    if (e)
        return e;
    struct fk_range *r = range_of(ptr, size);
    if (!r || !desc || !count || !size || ptr % GRAN || size % GRAN)
        return leave(CUDA_ERROR_INVALID_VALUE);
    size_t first = (size_t)((char *)ptr - r->base) / GRAN, n = size / GRAN;
    for (size_t i = first; i < first + n; i++)
        if (!r->pages[i])
            return leave(CUDA_ERROR_INVALID_VALUE);
    uint16_t mask = 0;
    for (size_t k = 0; k < count; k++) {
        if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[k].location.id < 0 ||
            desc[k].location.id >= fk_ndev)
            return leave(CUDA_ERROR_INVALID_DEVICE);
        if (desc[k].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            mask |= (uint16_t)(1u << desc[k].location.id);
    }
    int rw = (mask >> r->device) & 1;
    if (mprotect((void *)ptr, size, rw ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        return leave(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = first; i < first + n; i++)
        r->access[i] = mask;
    return leave(CUDA_SUCCESS);
}

/* Unmaps pages [first, first + n) of r (whole mappings, checked by the caller). */
static void unmap_pages(struct fk_range *r, size_t first, size_t n)
{
    for (size_t i = first; i < first + n; i++) {
        struct fk_handle *h = r->pages[i];
        r->pages[i] = NULL;
        r->access[i] = 0;
        fk_region_free_vmm(r->regions[i]);
        r->regions[i] = NULL;
        if (!--h->maps)
            handle_put(h);
    }
    mmap(r->base + first * GRAN, n * GRAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult e = enter();
    if (e)
        return e;
    struct fk_range *r = range_of(ptr, size);
    if (!r || !size || ptr % GRAN || size % GRAN)
        return leave(CUDA_ERROR_INVALID_VALUE);
    size_t first = (size_t)((char *)ptr - r->base) / GRAN, n = size / GRAN;
    for (size_t i = first; i < first + n; i++)
        if (!r->pages[i])
            return leave(CUDA_ERROR_INVALID_VALUE);
    /* Whole mappings only: the range may not cut one (a mapping: a handle's pages in a row). */
    if ((first > 0 && r->pages[first - 1] == r->pages[first]) ||
        (first + n < r->size / GRAN && r->pages[first + n] == r->pages[first + n - 1]))
        return leave(CUDA_ERROR_INVALID_VALUE);
    /* No wait for work still touching it: the driver does not promise one either. */
    unmap_pages(r, first, n);
    return leave(CUDA_SUCCESS);
}

void fk_vmm_reset(int device)
{
    for (struct fk_range **link = &ranges; *link;) {
        struct fk_range *r = *link;
        if (r->device != device) {
            link = &r->next;
            continue;
        }
        for (size_t i = 0; i < r->size / GRAN; i++)
            if (r->pages[i]) {
                r->pages[i]->released = 1;
                unmap_pages(r, i, 1);
            }
        range_drop(link);
    }
    /* Every handle of the device goes, released or not (the capacity count is reset after). */
    for (struct fk_handle *h = handles, *next; h; h = next) {
        next = h->next;
        if (h->device == device && !h->maps) {
            h->released = 1;
            handle_put(h);
        }
    }
}

unsigned fakecuda_vmm_access(const void *p)
{
    if (fk_enter() != cudaSuccess)
        return 0;
    struct fk_range *r = range_of((CUdeviceptr)p, 1);
    unsigned mask = r && r->pages[((const char *)p - r->base) / GRAN] ? r->access[((const char *)p - r->base) / GRAN] : 0;
    pthread_mutex_unlock(&fk_mu);
    return mask;
}

void *fk_vmm_proc(const char *name)
{
    static const struct {
        const char *name;
        void *fn;
    } calls[] = {
        {"cuMemAddressReserve", (void *)cuMemAddressReserve}, {"cuMemAddressFree", (void *)cuMemAddressFree},
        {"cuMemCreate", (void *)cuMemCreate},                 {"cuMemRelease", (void *)cuMemRelease},
        {"cuMemMap", (void *)cuMemMap},                       {"cuMemUnmap", (void *)cuMemUnmap},
        {"cuMemSetAccess", (void *)cuMemSetAccess},
    };
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
        if (!strcmp(name, calls[i].name))
            return calls[i].fn;
    return NULL;
}
