/* Analyzer symbolization: one uniquely named function allocates and the block is never freed,
 * so `gmshim leaks` must name that function, this file and the line of the cudaMalloc call. */
#include <cuda_runtime_api.h>
#include <stdio.h>

static void *kept;

static __attribute__((noinline)) int gmshim_test_unique_allocator_7f3a(size_t n)
{
    int rc = (int)cudaMalloc(&kept, n); /* SYM_UNIQUE_LINE */
    return rc + 1;
}

int main(void)
{
    int rc = gmshim_test_unique_allocator_7f3a(3u << 20);
    printf("allocated: %d\n", rc - 1);
    return rc == 1 ? 0 : 1;
}
