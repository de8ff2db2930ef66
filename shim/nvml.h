/* NVML, loaded at run time only where the machine has it (libnvidia-ml.so.1): a device's memory
 * and the processes that hold some of it. The shim links no NVIDIA library; every failure here
 * is a term the ledger leaves out, never an error of the program's (nvml.c). */
#ifndef GM_NVML_H
#define GM_NVML_H

#include <stddef.h>
#include <stdint.h>

typedef struct nvml_proc {
    uint32_t pid;
    uint64_t used;               /* bytes; UINT64_MAX: NVML does not say (another container) */
} nvml_proc_t;

/* 1 once NVML is loaded and initialised (the first call tries, once; never in a fork child). */
int nvml_ready(void);
/* NVML's handle of the device whose PCI bus id this is ("0000:3b:00.0"), else of NVML's device
 * `index` when `index` >= 0; NULL when neither is known. */
void *nvml_device(const char *bus_id, int index);
/* The device's memory as NVML counts it: 0, or -1. */
int nvml_memory(void *dev, uint64_t *total, uint64_t *free_bytes);
/* The processes with a context on the device (compute and graphics, each pid once), at most max
 * of them in out: how many NVML gave (may exceed max), or -1. */
int nvml_processes(void *dev, nvml_proc_t *out, int max);
/* NVML's name for a process (for a pid this process cannot read in /proc): 0, or -1. */
int nvml_process_name(uint32_t pid, char *buf, size_t len);
/* A fork child: NVML is never called again. */
void nvml_forget(void);

#endif
