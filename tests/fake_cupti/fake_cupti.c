/* A fake libcupti.so.13 for gmshim's tests: one subscriber, driver-API callbacks delivered for
 * the ids enabled, failures on request (FAKE_CUPTI_BUSY, FAKE_CUPTI_FAIL). Test code only; it
 * must never be installed or found outside the test tree. See fake_cupti.h. */
#include "fake_cupti.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CBID 2048

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_CallbackFunc callback;   /* atomic: read by every delivery */
static void *userdata;
static int subscribed;
static unsigned char enabled[MAX_CBID]; /* atomic bytes */
static struct CUpti_Subscriber_st { int dummy; } the_subscriber;

static int deliver(unsigned cbid, const void *data)
{
    if (cbid >= MAX_CBID || !__atomic_load_n(&enabled[cbid], __ATOMIC_ACQUIRE))
        return 0;
    CUpti_CallbackFunc fn = __atomic_load_n(&callback, __ATOMIC_ACQUIRE);
    if (!fn)
        return 0;
    fn(userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, data);
    return 1;
}

/* Hooks into the driver, as the real CUPTI does; no driver loaded, no callbacks. */
static void attach(fake_cupti_dispatch_fn fn)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return;
    void (*att)(fake_cupti_dispatch_fn) = (void (*)(fake_cupti_dispatch_fn))dlsym(h, "fake_cuda_attach_cupti");
    if (att)
        att(fn);
    dlclose(h);
}

static CUptiResult subscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc fn, void *ud,
                             char *other, size_t other_len)
{
    if (!subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    const char *busy = getenv("FAKE_CUPTI_BUSY");
    const char *fail = getenv("FAKE_CUPTI_FAIL");
    if (busy && *busy) {
        if (other && other_len)
            snprintf(other, other_len, "%s", busy);
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    if (fail && *fail)
        return (CUptiResult)atoi(fail);
    pthread_mutex_lock(&lock);
    if (subscribed) {
        pthread_mutex_unlock(&lock);
        if (other && other_len)
            snprintf(other, other_len, "an earlier subscriber");
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    subscribed = 1;
    userdata = ud;
    __atomic_store_n(&callback, fn, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    *subscriber = &the_subscriber;
    attach(deliver);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc fn, void *ud)
{
    return subscribe(subscriber, fn, ud, NULL, 0);
}

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc fn, void *ud,
                              CUpti_SubscriberParams *params)
{
    if (params && params->structSize < CUpti_SubscriberParams_STRUCT_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    return subscribe(subscriber, fn, ud, params ? params->oldSubscriberName : NULL,
                     params && params->oldSubscriberName ? params->oldSubscriberSize : 0);
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    if (subscriber != &the_subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    attach(NULL);
    pthread_mutex_lock(&lock);
    subscribed = 0;
    __atomic_store_n(&callback, NULL, __ATOMIC_RELEASE);
    for (int i = 0; i < MAX_CBID; i++)
        __atomic_store_n(&enabled[i], 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid)
{
    if (subscriber != &the_subscriber || domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= MAX_CBID ||
        cbid == CUPTI_DRIVER_TRACE_CBID_INVALID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    __atomic_store_n(&enabled[cbid], enable ? 1 : 0, __ATOMIC_RELEASE);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

/* The fake driver's contexts are 0xC0DE0000 + device. */
CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *deviceId)
{
    uintptr_t c = (uintptr_t)context;
    if (!deviceId || c < 0xC0DE0000u || c >= 0xC0DE0000u + 64)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *deviceId = (uint32_t)(c - 0xC0DE0000u);
    return CUPTI_SUCCESS;
}
