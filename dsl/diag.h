/* Diagnostics: `file:line:column: error: message`, then the source line and a caret under the
 * column, as compilers print them. Messages accumulate in one growable string. */
#ifndef NBC_DIAG_H
#define NBC_DIAG_H

#include <stddef.h>

typedef struct {
    const char *name;  /* file name as given, shown in messages */
    const char *text;  /* the whole source, NUL-terminated (it may contain other NULs) */
    size_t len;
} source;

typedef struct {
    int line, col;     /* 1-based; line 0 means "no location" */
} loc;

typedef struct {
    char *text;        /* all messages so far, NUL-terminated ("" when none) */
    size_t len, cap;
    int errors;
} diag;

void diag_init(diag *d);
void diag_free(diag *d);
void diag_clear(diag *d);
/* Reports an error at `at` in `src` (either may be absent: src NULL or at.line 0). */
void diag_error(diag *d, const source *src, loc at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Appends plain text (a note under the last error, for example). */
void diag_append(diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
