/* One strict parser for every environment variable (env.h). */
#include "env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *err, size_t errsize, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errsize, const char *fmt, ...)
{
    if (err && errsize) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errsize, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *value_of(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int env_uint(const char *name, uint64_t dflt, uint64_t max, uint64_t *out, char *err, size_t errsize)
{
    const char *v = value_of(name);
    *out = dflt;
    if (!v) return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    /* strtoull alone would take "-1" as 2^64-1 and " 7" as 7 */
    if (strspn(v, "0123456789") != strlen(v) || errno == ERANGE || x > max)
        return bad(err, errsize, "%s: '%.40s' is not a whole number in 0 .. %llu", name, v, (unsigned long long)max);
    *out = x;
    return 0;
}

int env_seconds(const char *name, double dflt_s, double max_s, long *out_ns, char *err, size_t errsize)
{
    const char *v = value_of(name);
    *out_ns = (long)(dflt_s * 1e9);
    if (!v) return 0;
    /* digits, with at most one decimal point among or after them: no sign, exponent or unit */
    size_t whole = strspn(v, "0123456789"), frac = v[whole] == '.' ? strspn(v + whole + 1, "0123456789") : 0;
    size_t len = whole + (v[whole] == '.') + frac;
    double s = strtod(v, NULL);
    if (len != strlen(v) || whole + frac == 0 || s > max_s)
        return bad(err, errsize, "%s: '%.40s' is not a number of seconds in 0 .. %g", name, v, max_s);
    *out_ns = (long)(s * 1e9);
    return 0;
}

int env_bool(const char *name, int dflt, int *out, char *err, size_t errsize)
{
    const char *v = value_of(name);
    *out = dflt;
    if (!v) return 0;
    if (strcmp(v, "0") && strcmp(v, "1")) return bad(err, errsize, "%s: '%.40s' is not 0 or 1", name, v);
    *out = v[0] == '1';
    return 0;
}

int env_text(const char *name, const char **out, char *err, size_t errsize)
{
    const char *v = value_of(name);
    *out = NULL;
    if (!v) return 0;
    for (const char *c = v; *c; c++)
        if ((unsigned char)*c < 32 || *c == 127) return bad(err, errsize, "%s: the value holds a control character", name);
    *out = v;
    return 0;
}
