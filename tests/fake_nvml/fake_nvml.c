/* libnvidia-ml.so.1 for the tests: the few NVML functions the shim's ledger asks, answering from
 * the fake CUDA runtime's card (tests/fakecuda.h: fakecuda_card, fakecuda_other), found in the
 * process at nvmlInit. Device i has the PCI bus id the fake runtime gives it (bus 0x18 + i); this
 * process is listed on a device once its context exists, with everything it holds there; device 0
 * also lists FAKECUDA_OTHERS' processes. FAKE_NVML_FAIL=1: nvmlInit fails, as on a machine whose
 * driver NVML cannot reach. Test code only. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OK 0
#define ERR_INVALID 2
#define ERR_NOT_FOUND 6
#define ERR_SIZE 7
#define ERR_DRIVER 9

typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc_t;

static int (*card)(int, unsigned long long *, unsigned long long *, int *);
static int (*other)(int, unsigned *, unsigned long long *, const char **);
static int (*count)(void);
static int devices[16];

int nvmlInit_v2(void);
int nvmlInit(void);
int nvmlShutdown(void);
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev);
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **dev);
int nvmlDeviceGetMemoryInfo(void *dev, mem_t *m);
int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned *n, proc_t *out);
int nvmlDeviceGetGraphicsRunningProcesses_v3(void *dev, unsigned *n, proc_t *out);
int nvmlSystemGetProcessName(unsigned pid, char *name, unsigned len);

int nvmlInit_v2(void)
{
    const char *fail = getenv("FAKE_NVML_FAIL");
    if (fail && *fail == '1')
        return ERR_DRIVER;
    card = (int (*)(int, unsigned long long *, unsigned long long *, int *))dlsym(RTLD_DEFAULT, "fakecuda_card");
    other = (int (*)(int, unsigned *, unsigned long long *, const char **))dlsym(RTLD_DEFAULT, "fakecuda_other");
    count = (int (*)(void))dlsym(RTLD_DEFAULT, "fakecuda_device_count");
    return card && other && count ? OK : ERR_DRIVER;
}

int nvmlInit(void) { return nvmlInit_v2(); }
int nvmlShutdown(void) { return OK; }

static void *handle(int i)
{
    return i >= 0 && i < 16 && i < count() ? &devices[i] : NULL;
}

static int index_of(void *dev)
{
    return dev ? (int)((int *)dev - devices) : -1;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
    unsigned domain, b, d, f;
    if (!card || !bus || !dev || sscanf(bus, "%x:%x:%x.%x", &domain, &b, &d, &f) != 4)
        return ERR_INVALID;
    *dev = b >= 0x18 ? handle((int)b - 0x18) : NULL;
    return *dev ? OK : ERR_NOT_FOUND;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **dev)
{
    if (!card || !dev)
        return ERR_INVALID;
    *dev = handle((int)index);
    return *dev ? OK : ERR_INVALID;
}

static unsigned long long others_bytes(int dev)
{
    unsigned long long sum = 0, b;
    unsigned pid;
    const char *name;
    for (int i = 0; dev == 0 && other(i, &pid, &b, &name) == 0; i++)
        sum += b;
    return sum;
}

int nvmlDeviceGetMemoryInfo(void *dev, mem_t *m)
{
    unsigned long long cap, self;
    int made, i = index_of(dev);
    if (!card || !m || card(i, &cap, &self, &made))
        return ERR_INVALID;
    m->total = cap;
    m->used = self + others_bytes(i);
    m->free = cap > m->used ? cap - m->used : 0;
    return OK;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned *n, proc_t *out)
{
    unsigned long long cap, self, b;
    int made, i = index_of(dev);
    if (!card || !n || card(i, &cap, &self, &made))
        return ERR_INVALID;
    proc_t list[17];
    unsigned k = 0, pid;
    const char *name;
    if (made)
        list[k++] = (proc_t){(unsigned)getpid(), self, 0, 0};
    for (int j = 0; i == 0 && k < 17 && other(j, &pid, &b, &name) == 0; j++)
        list[k++] = (proc_t){pid, b, 0, 0};
    if (*n < k) {
        *n = k;
        return ERR_SIZE;
    }
    memcpy(out, list, k * sizeof *list);
    *n = k;
    return OK;
}

int nvmlDeviceGetGraphicsRunningProcesses_v3(void *dev, unsigned *n, proc_t *out)
{
    (void)dev, (void)out;
    if (!n)
        return ERR_INVALID;
    *n = 0;
    return OK;
}

int nvmlSystemGetProcessName(unsigned pid, char *name, unsigned len)
{
    unsigned long long b;
    unsigned p;
    const char *n;
    for (int i = 0; other && other(i, &p, &b, &n) == 0; i++)
        if (p == pid && *n) {
            snprintf(name, len, "%s", n);
            return OK;
        }
    return ERR_NOT_FOUND;
}
