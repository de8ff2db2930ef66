/* The timeline's HTML page (timeline_html.c), its script and style in timeline_page.h. */
#ifndef GM_TIMELINE_HTML_H
#define GM_TIMELINE_HTML_H

#include "timeline.h"

/* The page (timeline_html.c): each log's JSON object (`first`: no comma before it); the page's
 * head, then the static SVG (what shows without a script), then its tail with the data. */
void tl_html_log(FILE *f, const tl_log_t *t, int first);
void tl_html_head(FILE *f, char *const *paths, int npaths);
void tl_html_tail(FILE *f, const char *json, size_t len);

#endif
