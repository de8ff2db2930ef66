/* A program that never calls CUDA: under the preload it must create no file and no thread. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    int threads = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)))
        threads += e->d_name[0] != '.';
    if (d)
        closedir(d);
    int files = 0;
    d = opendir(".");
    while (d && (e = readdir(d)))
        files += strstr(e->d_name, ".gmlog") != NULL;
    if (d)
        closedir(d);
    printf("threads=%d logs=%d\n", threads, files);
    return threads == 1 && files == 0 ? 0 : 1;
}
