#include "diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void diag_init(diag *d) { memset(d, 0, sizeof *d); }

void diag_free(diag *d)
{
    free(d->text);
    diag_init(d);
}

void diag_clear(diag *d)
{
    if (d->text) d->text[0] = '\0';
    d->len = 0;
    d->errors = 0;
}

static void vappend(diag *d, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    if (d->len + (size_t)n + 1 > d->cap) {
        size_t cap = d->cap ? d->cap : 256;
        while (cap < d->len + (size_t)n + 1) cap *= 2;
        char *t = realloc(d->text, cap);
        if (!t) return; /* out of memory: the message is lost, the error still counted */
        d->text = t;
        d->cap = cap;
    }
    vsnprintf(d->text + d->len, (size_t)n + 1, fmt, ap);
    d->len += (size_t)n;
}

void diag_append(diag *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vappend(d, fmt, ap);
    va_end(ap);
}

/* The source line `line` (1-based) as a pointer and length, or NULL when out of range. */
static const char *find_line(const source *src, int line, size_t *len)
{
    const char *p = src->text, *end = src->text + src->len;
    for (int l = 1; l < line; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return NULL;
        p = nl + 1;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *len = (size_t)((nl ? nl : end) - p);
    return p;
}

static void show_line(diag *d, const source *src, loc at)
{
    size_t len;
    const char *p = find_line(src, at.line, &len);
    if (!p) return;
    if (len > 200) len = 200; /* a huge line is cut, not dumped */
    diag_append(d, "%5d | ", at.line);
    for (size_t i = 0; i < len; i++) /* control bytes would garble the terminal */
        diag_append(d, "%c", (p[i] == '\t' || ((unsigned char)p[i] >= 32 && p[i] != 127)) ? p[i] : '?');
    diag_append(d, "\n      | ");
    for (int i = 1; i < at.col && (size_t)i <= len; i++) diag_append(d, "%c", p[i - 1] == '\t' ? '\t' : ' ');
    diag_append(d, "^\n");
}

void diag_error(diag *d, const source *src, loc at, const char *fmt, ...)
{
    d->errors++;
    if (src && at.line > 0)
        diag_append(d, "%s:%d:%d: error: ", src->name, at.line, at.col);
    else if (src)
        diag_append(d, "%s: error: ", src->name);
    else
        diag_append(d, "error: ");
    va_list ap;
    va_start(ap, fmt);
    vappend(d, fmt, ap);
    va_end(ap);
    diag_append(d, "\n");
    if (src && at.line > 0) show_line(d, src, at);
}
