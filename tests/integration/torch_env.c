/* GMSHIM_TORCH=own sets PYTORCH_NO_CUDA_MEMORY_CACHING=1 at load time unless it is already set;
 * prints what the program sees. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    const char *v = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    printf("PYTORCH_NO_CUDA_MEMORY_CACHING=%s\n", v ? v : "(unset)");
    return 0;
}
