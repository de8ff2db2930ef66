/* Reading CPython's frame chain. Offsets below were taken from each version's headers
 * (offsetof on PyThreadState, _PyCFrame, _PyInterpreterFrame, PyCodeObject, PyASCIIObject) and
 * are checked at run time against PyCode_Type / PyUnicode_Type before anything is trusted. */
#include "pyframes.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct py_layout {
    int minor;
    size_t tstate_frame;     /* PyThreadState -> current frame (3.13) or -> cframe (3.11/12) */
    int via_cframe;          /* current_frame is in _PyCFrame at cframe_frame */
    size_t cframe_frame;
    size_t frame_code, frame_previous, frame_instr, frame_owner;
    size_t code_filename, code_qualname, code_adaptive;
    size_t ascii_size;       /* sizeof(PyASCIIObject): where compact ASCII data starts */
    int has_cstack_owner;    /* frames owned by the C stack (shims) are skipped */
} py_layout_t;

static const py_layout_t layouts[] = {
    {11, 56, 1, 8, 32, 48, 56, 69, 112, 128, 184, 48, 0},
    {12, 56, 1, 0, 0, 8, 56, 70, 112, 128, 192, 40, 1},
    {13, 72, 0, 0, 0, 8, 56, 70, 112, 128, 200, 40, 1},
};

#define OWNED_BY_CSTACK 3
#define OB_TYPE 8            /* PyObject: ob_refcnt, ob_type */
#define ASCII_LENGTH 16
#define ASCII_STATE 32

static struct {
    int state;               /* 0 unknown, 1 ready, -1 unavailable */
    const py_layout_t *L;
    int (*is_initialized)(void);
    void *(*this_thread_state)(void);
    int (*addr2line)(void *code, int addr);
    const void *code_type, *unicode_type;
    char version[8];
} py;

static void py_setup(void)
{
    const char *(*get_version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    py.is_initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    py.this_thread_state = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    py.addr2line = (int (*)(void *, int))dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
    py.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    py.unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    int major = 0, minor = 0;
    if (!get_version || !py.is_initialized || !py.this_thread_state || !py.addr2line ||
        !py.code_type || !py.unicode_type || sscanf(get_version(), "%d.%d", &major, &minor) != 2 ||
        major != 3) {
        py.state = -1;
        return;
    }
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].minor == minor)
            py.L = &layouts[i];
    if (!py.L) {
        py.state = -1;
        return;
    }
    snprintf(py.version, sizeof py.version, "3.%d", minor);
    py.state = 1;
}

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

static int ready(void)
{
    pthread_once(&setup_once, py_setup);
    return py.state == 1 && py.is_initialized();
}

const char *pyframes_version(void)
{
    return ready() ? py.version : NULL;
}

static uintptr_t load(uintptr_t base, size_t off)
{
    uintptr_t v;
    memcpy(&v, (const void *)(base + off), sizeof v);
    return v;
}

static int is_code(uintptr_t obj)
{
    return obj && load(obj, OB_TYPE) == (uintptr_t)py.code_type;
}

int pyframes_capture(gm_pyframe_raw_t *out, int max)
{
    if (max <= 0 || !ready())
        return 0;
    const py_layout_t *L = py.L;
    uintptr_t ts = (uintptr_t)py.this_thread_state();
    if (!ts)
        return 0;
    uintptr_t frame = load(ts, L->tstate_frame);
    if (L->via_cframe && frame)
        frame = load(frame, L->cframe_frame);
    int n = 0;
    for (int guard = 0; frame && n < max && guard < 1024; guard++) {
        uint8_t owner = *(const uint8_t *)(frame + L->frame_owner);
        uintptr_t code = load(frame, L->frame_code);
        if (!(L->has_cstack_owner && owner == OWNED_BY_CSTACK)) {
            if (!is_code(code))
                break; /* not the layout we expect: stop rather than guess */
            /* LASTI in code units, as CPython computes it (prev_instr in 3.11/3.12,
             * instr_ptr in 3.13), times the 2-byte unit. */
            uintptr_t instr = load(frame, L->frame_instr);
            uintptr_t first = code + L->code_adaptive;
            out[n].code = code;
            out[n].addr = instr >= first && instr - first < (1u << 30) ? (int)(instr - first) : -1;
            n++;
        }
        frame = load(frame, L->frame_previous);
    }
    return n;
}

int pyframes_line(const gm_pyframe_raw_t *f)
{
    if (!ready() || !is_code(f->code))
        return 0;
    return py.addr2line((void *)f->code, f->addr);
}

/* A str's UTF-8 when it is compact ASCII (file and function names nearly always are). */
static void read_str(uintptr_t s, char *out, size_t len)
{
    if (!len)
        return;
    snprintf(out, len, "?");
    if (!s || load(s, OB_TYPE) != (uintptr_t)py.unicode_type)
        return;
    uint32_t state;
    memcpy(&state, (const void *)(s + ASCII_STATE), sizeof state);
    int compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || !ascii) {
        snprintf(out, len, "<non-ascii>");
        return;
    }
    size_t n = (size_t)load(s, ASCII_LENGTH);
    if (n >= len)
        n = len - 1;
    memcpy(out, (const void *)(s + py.L->ascii_size), n);
    out[n] = 0;
}

void pyframes_describe(uintptr_t code, char *file, size_t file_len, char *func, size_t func_len)
{
    if (!ready() || !is_code(code)) {
        snprintf(file, file_len, "?");
        snprintf(func, func_len, "?");
        return;
    }
    read_str(load(code, py.L->code_filename), file, file_len);
    read_str(load(code, py.L->code_qualname), func, func_len);
}
