/* The one reader of the environment: every variable the library (and nbcc) reads goes
 * through these, so each kind of value is equally strict everywhere. Unset or empty means the
 * default; any other value must be exactly what the kind allows, else the call returns -1 with
 * a message naming the variable, its value and what it should be ("NBC_CACHE_BYTES: '-1' is
 * not a whole number in 0 .. 18446744073709551615"). err may be NULL. No MPI here. */
#ifndef NBC_ENV_H
#define NBC_ENV_H

#include <stddef.h>
#include <stdint.h>

/* A whole number in 0 .. max (decimal digits only: no sign, no suffix). */
int env_uint(const char *name, uint64_t dflt, uint64_t max, uint64_t *out, char *err, size_t errsize);
/* A number of seconds, whole or decimal ("60", "0.3"), in 0 .. max_s; *out_ns in nanoseconds. */
int env_seconds(const char *name, double dflt_s, double max_s, long *out_ns, char *err, size_t errsize);
/* 0 or 1. */
int env_bool(const char *name, int dflt, int *out, char *err, size_t errsize);
/* A name, spec or path: any text without control characters; *out is NULL when unset or empty. */
int env_text(const char *name, const char **out, char *err, size_t errsize);

#endif
