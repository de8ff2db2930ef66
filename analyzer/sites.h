/* Call sites as people read them: a site's Python frames (innermost first) then its native
 * frames (innermost first), each symbolized; a one-line label; the text and JSON forms the
 * reports print. Unknown sites and frames come out as such, never as a crash. */
#ifndef GM_SITES_H
#define GM_SITES_H

#include "json.h"
#include "model.h"

#include <stdio.h>

#define SITE_MAX_FRAMES 160

#define SITE_NAME_MAX 160

/* What follows a native name read from a file whose build id is not the one that ran, where a
 * name is shown without the text reports' own note (labels, the page, the exports). */
#define SITE_UNSURE "[build id differs]" /* characters of a function name the text reports show */

typedef struct site_frame {
    int python;               /* 1: a Python frame */
    const char *function;     /* never NULL; C++ names demangled */
    const char *symbol;       /* native: the ELF name when it differs from function (mangled) */
    const char *file;         /* NULL when unknown */
    unsigned line;
    const char *module;       /* native: the module's path, NULL when unknown */
    uint64_t offset;          /* native: offset in the module (absolute address without one) */
    int build_id_differs;
    char buf[48];             /* storage for a made-up function name */
} site_frame_t;

/* Where an exported stack (memory_viz, the HTML page's flame graph) puts a site's Python frames:
 * as recorded (memory_viz: native frames innermost first, then the Python ones), first, or
 * alone (a site without Python frames keeps its native ones). --python-frames first|only. */
enum { SITE_PY_RECORDED = 0, SITE_PY_FIRST, SITE_PY_ONLY };
/* "first" or "only": SITE_PY_*; -1 after saying why (who: "gmshim export"). */
int site_parse_python_frames(const char *who, const char *text);

/* A frame's function as shown beside others: with SITE_UNSURE after it when the file it was read
 * from is another build (returns f->function, or buf holding the marked name). */
const char *site_frame_name(const site_frame_t *f, char *buf, size_t len);
/* The frames of a site; returns how many (at most max). */
size_t site_frames(const model_t *m, uint32_t site_id, site_frame_t *out, size_t max);
/* A short name for a site: its first Python frame, else the first native frame outside the
 * CUDA runtime and gmshim; " [site N]" (the log's site id, JSON's "site") follows when another
 * site of the log has the same name, so that no two stacks read alike. */
const char *site_label(const model_t *m, uint32_t site_id, char *buf, size_t len);
/* The stack, one frame a line, at most `depth` lines (0: all). With `fold`, at a site that has
 * a Python frame, each run of frames inside PyTorch and CUDA libraries (libtorch*, libc10*,
 * libcuda*, libcudart*, libcublas*, libcudnn*, libnccl*, ...) is one line: "… 7 frames in
 * libtorch_cuda.so". Consecutive frames without a name in one library are one line, the library
 * named once: "libfoo.so +0x1a2b +0x3c4d". */
void site_print(FILE *f, const model_t *m, uint32_t site_id, const char *indent, unsigned depth, int fold);
/* "frames": [...] */
void site_json(json_t *j, const model_t *m, uint32_t site_id);

#endif
