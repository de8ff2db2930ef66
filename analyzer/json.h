/* A small streaming JSON writer: objects, arrays, numbers and escaped strings, commas placed by
 * the writer. It never buffers a document; it must always emit valid UTF-8-safe JSON, whatever
 * bytes the strings hold (control bytes are escaped, invalid UTF-8 becomes U+FFFD). */
#ifndef GM_JSON_H
#define GM_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef struct json {
    FILE *f;
    int depth;
    int count[JSON_MAX_DEPTH];  /* members written at each level */
} json_t;

void json_init(json_t *j, FILE *f);
/* `key` is the member name inside an object, NULL inside an array or at the top. */
void json_obj(json_t *j, const char *key);
void json_obj_end(json_t *j);
void json_arr(json_t *j, const char *key);
void json_arr_end(json_t *j);
void json_u64(json_t *j, const char *key, uint64_t v);
void json_i64(json_t *j, const char *key, int64_t v);
void json_dbl(json_t *j, const char *key, double v);
void json_bool(json_t *j, const char *key, int v);
void json_null(json_t *j, const char *key);
void json_str(json_t *j, const char *key, const char *s);
void json_strn(json_t *j, const char *key, const char *s, size_t n);
/* Ends a top-level value with a newline (one object per line). */
void json_line_end(json_t *j);

#endif
