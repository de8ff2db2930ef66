/* A small training-like loop for `make demo` and the analyzer's fixtures: persistent weights,
 * per-iteration activations freed every iteration, and one leak (a per-iteration "loss" kept in
 * a history list), with a gmshim mark per iteration, until an allocation fails. Plain CUDA
 * runtime API only (gmshim_mark through dlsym), so it also runs without gmshim or on a GPU. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024.0 * 1024.0)
#define MAX_ITERS 400
#define NACT 6

typedef int (*mark_fn)(const char *);

static mark_fn mark;
static void *weights[4];
static void *history[MAX_ITERS];   /* the leak: every iteration's loss stays referenced */
static int nhistory;

static void touch(void *p, size_t n)
{
    /* Initialise the start of each tensor, as a kernel would write it (cheap on the fake). */
    cudaMemset(p, 0, n < (4u << 20) ? n : (4u << 20));
}

static __attribute__((noinline)) cudaError_t load_weights(size_t each)
{
    for (int i = 0; i < 4; i++) {
        cudaError_t e = cudaMalloc(&weights[i], each);
        if (e != cudaSuccess)
            return e;
        touch(weights[i], each);
    }
    return cudaSuccess;
}

static __attribute__((noinline)) cudaError_t forward_activations(void **act, const size_t *sizes)
{
    for (int i = 0; i < NACT; i++) {
        act[i] = NULL;
        cudaError_t e = cudaMalloc(&act[i], sizes[i]);
        if (e != cudaSuccess)
            return e;
        touch(act[i], sizes[i]);
    }
    return cudaSuccess;
}

/* The bug this demo is about: the loss tensor of every step is appended to a history list and
 * never freed (in PyTorch: `losses.append(loss)` instead of `losses.append(loss.item())`). */
static __attribute__((noinline)) cudaError_t keep_loss_history(size_t bytes)
{
    void *loss = NULL;
    cudaError_t e = cudaMalloc(&loss, bytes);
    if (e != cudaSuccess)
        return e;
    touch(loss, bytes);
    history[nhistory++] = loss;
    return cudaSuccess;
}

static __attribute__((noinline)) cudaError_t backward_and_step(void **act, size_t grad_bytes)
{
    void *grad = NULL;
    cudaError_t e = cudaMalloc(&grad, grad_bytes);
    for (int i = NACT - 1; i >= 0; i--) {
        cudaFree(act[i]);
        act[i] = NULL;
    }
    if (e != cudaSuccess)
        return e;
    touch(grad, grad_bytes);
    cudaFree(grad);
    return cudaSuccess;
}

int main(void)
{
    mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    if (e != cudaSuccess) {
        fprintf(stderr, "demo_train: cudaMemGetInfo failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    /* Sizes are fractions of what is free, so the same run fits any device. */
    size_t unit = free_b / 1000 / 512 * 512;
    size_t w_each = 64 * unit;                       /* 4 x 6.4% = 25.6% */
    size_t act[NACT] = {80 * unit, 60 * unit, 50 * unit, 50 * unit, 40 * unit, 20 * unit};
    size_t loss = 30 * unit, grad = 32 * unit;
    printf("demo_train: %.0f MiB free of %.0f MiB; weights %.0f MiB, activations %.0f MiB per "
           "iteration, a leak of %.0f MiB per iteration%s\n",
           free_b / MiB, total / MiB, 4 * w_each / MiB, (act[0] + act[1] + act[2] + act[3] + act[4] + act[5]) / MiB,
           loss / MiB, mark ? " (gmshim marks on)" : "");
    if ((e = load_weights(w_each)) != cudaSuccess) {
        fprintf(stderr, "demo_train: the weights do not fit: %s\n", cudaGetErrorString(e));
        return 1;
    }
    for (int it = 1; it <= MAX_ITERS; it++) {
        char label[32];
        snprintf(label, sizeof label, "iteration %d", it);
        if (mark)
            mark(label);
        void *a[NACT] = {0};
        const char *stage = "forward_activations";
        e = forward_activations(a, act);
        if (e == cudaSuccess) {
            stage = "keep_loss_history";
            e = keep_loss_history(loss);
        }
        if (e == cudaSuccess) {
            stage = "backward_and_step";
            e = backward_and_step(a, grad);
        } else {
            for (int i = 0; i < NACT; i++)
                if (a[i])
                    cudaFree(a[i]);
        }
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            printf("demo_train: iteration %d: %s: cudaMalloc failed with cudaErrorMemoryAllocation -- "
                   "the expected OOM (%d loss tensors, %.0f MiB, were still referenced)\n",
                   it, stage, nhistory, nhistory * loss / MiB);
            for (int i = 0; i < nhistory; i++)
                cudaFree(history[i]);
            for (int i = 0; i < 4; i++)
                cudaFree(weights[i]);
            return 0;
        }
        if (e != cudaSuccess) {
            fprintf(stderr, "demo_train: iteration %d: %s\n", it, cudaGetErrorString(e));
            return 1;
        }
    }
    fprintf(stderr, "demo_train: no OOM after %d iterations; expected one\n", MAX_ITERS);
    return 1;
}
