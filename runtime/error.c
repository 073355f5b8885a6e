/* Error messages: nbc_fail records why a call fails, per thread like errno, as one plain line;
 * a request's own failure is kept in the request too (request.c). A leaf: it calls nothing of
 * the runtime. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static __thread char message[NBC_ERROR_MAX]; /* per thread, like errno */

/* A source line or caret under it, as the compiler draws them ("   14 | ..." or "      | ^"). */
static int is_diagram(const char *line)
{
    while (*line == ' ' || (*line >= '0' && *line <= '9')) line++;
    return *line == '|';
}

/* The compiler's diagnostics are for a terminal; the library's message is one plain line:
 * "file:line:col: message", the diagrams dropped, "error: " dropped, lines joined by "; ". */
static void one_line(char *m, size_t size)
{
    char text[sizeof message];
    snprintf(text, sizeof text, "%s", m);
    size_t n = 0;
    for (char *line = text, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : line + strlen(line);
        if (nl) *nl = '\0';
        while (*line == ' ') line++;
        if (!*line || is_diagram(line)) continue;
        if (n && n + 2 < size) { /* "failed:" and the reason on the next line read as one */
            if (m[n - 1] != ':') m[n++] = ';';
            m[n++] = ' ';
        }
        for (char *p = line; *p && n + 1 < size;) {
            if (!strncmp(p, "error: ", 7) && (p == line || (p >= line + 2 && !strncmp(p - 2, ": ", 2)))) p += 7;
            else m[n++] = *p++;
        }
    }
    m[n] = '\0';
}

int nbc_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    one_line(message, sizeof message);
    return code;
}

void nbc_clear_error(void) { message[0] = '\0'; }
const char *error_text(void) { return message; }

/* The one-line form of a message, into out (for a request's own copy). */
void error_one_line(char *out, size_t size, const char *text)
{
    snprintf(out, size, "%s", text);
    one_line(out, size);
}
