/* Lists of numbers on the command line: "1..33", "2,4,8", "2..1024*2", "0..100+10"; items
 * may use p ("p+1", "2p-1") when a p is given, and k, m, g suffixes (powers of 1024). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "nbcc.h"

static int parse_term(const char **s, int64_t p, int has_p, int64_t *out)
{
    int64_t x = 1;
    int digits = 0;
    if (isdigit((unsigned char)**s)) {
        char *end;
        x = strtoll(*s, &end, 10);
        *s = end;
        digits = 1;
        const char *u = strchr("kmg", tolower((unsigned char)**s));
        if (**s && u) {
            x <<= 10 * (u - "kmg" + 1);
            (*s)++;
        }
        if (**s == '*' && (*s)[1] == 'p') (*s)++;
    }
    if (**s == 'p') {
        if (!has_p) return -1;
        x *= p;
        (*s)++;
    } else if (!digits) {
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_expr(const char **s, int64_t p, int has_p, int64_t *out)
{
    int64_t sum = 0, sign = 1;
    if (**s == '-') sign = -1, (*s)++;
    for (;;) {
        int64_t t;
        if (parse_term(s, p, has_p, &t)) return -1;
        sum += sign * t;
        if (**s != '+' && **s != '-') break;
        if (**s == '+' && !isdigit((unsigned char)(*s)[1]) && (*s)[1] != 'p') break;
        sign = **s == '-' ? -1 : 1;
        (*s)++;
    }
    *out = sum;
    return 0;
}

/* Expands text into *out (malloc'ed, *n items). Returns 0, or -1 after a message. */
int expand_list(const char *opt, const char *text, int64_t p, int has_p, int64_t **out, size_t *n)
{
    size_t cap = 16;
    *n = 0;
    *out = malloc(cap * sizeof **out);
    const char *s = text;
    while (*out) {
        int64_t lo, hi, step = 1;
        char how = '+';
        if (parse_expr(&s, p, has_p, &lo)) break;
        hi = lo;
        if (s[0] == '.' && s[1] == '.') {
            s += 2;
            if (parse_expr(&s, p, has_p, &hi)) break;
            if (*s == '*' || *s == '+') {
                how = *s++;
                if (parse_term(&s, p, 0, &step)) break;
            }
            if (step < (how == '*' ? 2 : 1)) break;
        }
        for (int64_t x = lo; x <= hi; x = how == '*' ? x * step : x + step) {
            if (*n == cap) {
                int64_t *v = cap < (1u << 24) ? realloc(*out, 2 * cap * sizeof *v) : NULL;
                if (!v) goto bad;
                *out = v;
                cap *= 2;
            }
            (*out)[(*n)++] = x;
            if (how == '*' && x <= 0) break;
        }
        if (!*s) return 0;
        if (*s++ != ',') break;
    }
bad:
    nbcc_usage_error("%s wants a list such as 1..33, 2,4,8, 2..1024*2%s, not '%s'", opt,
            has_p ? " or 1,p+1,2p-1" : " or 8,4k,1m", text);
    free(*out);
    *out = NULL;
    return -1;
}

double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}
