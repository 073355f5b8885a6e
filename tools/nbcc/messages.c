/* nbcc's messages: one line each, starting with the subcommand, "nbcc dump: ...", so it says
 * who complains. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "collectives.h"
#include "nbcc.h"

const char *nbcc_cmd = "nbcc";

void nbcc_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", nbcc_cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A mistake on the command line: one line, not the whole usage again. Returns 2. */
int nbcc_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", nbcc_cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see '%s --help')\n", nbcc_cmd);
    va_end(ap);
    return 2;
}

int nbcc_bad_collective(const char *name)
{
    char known[256] = "";
    for (int c = 0; c < COLL_COUNT_; c++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", c ? ", " : "", collective_names[c]);
    return nbcc_usage_error("unknown collective '%s' (known: %s)", name, known);
}
