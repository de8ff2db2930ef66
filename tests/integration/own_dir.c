/* Run with a relative LD_PRELOAD (./libgmshim.so): moves into the directory argv[1], as a
 * program may before its first CUDA call, then asks gmshim where the PyTorch bridge for the torch
 * at argv[2] would come from (gmshim_torch_bridge_prepare, no build) and prints its answer as
 * "<status> <message>". The library's own directory must be the one it was loaded from. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3 || chdir(argv[1]) != 0) {
        fprintf(stderr, "usage: own_dir DIR TORCH_DIR (DIR must exist)\n");
        return 2;
    }
    int (*prepare)(const char *, int, char *, unsigned long) =
        (int (*)(const char *, int, char *, unsigned long))dlsym(RTLD_DEFAULT, "gmshim_torch_bridge_prepare");
    if (!prepare) {
        fprintf(stderr, "gmshim is not preloaded\n");
        return 3;
    }
    char msg[8192] = "";
    int rc = prepare(argv[2], 0, msg, sizeof msg);
    printf("%d %s\n", rc, msg);
    return 0;
}
