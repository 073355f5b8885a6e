#include "compare.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"

/* "ring" for allreduce_ring: the collective's prefix says nothing in a table of one collective. */
static const char *short_name(const sched_def *s, const char *collective)
{
    size_t n = strlen(collective);
    return !strncmp(s->name, collective, n) && s->name[n] == '_' && s->name[n + 1] ? s->name + n + 1 : s->name;
}

static void size_text(int64_t b, char *out, size_t size)
{
    if (b >= (1 << 20) && b % (1 << 20) == 0) snprintf(out, size, "%" PRId64 " MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0) snprintf(out, size, "%" PRId64 " KiB", b >> 10);
    else snprintf(out, size, "%" PRId64 " B", b);
}

static void header(const compare_grid *g, int width, FILE *out)
{
    fprintf(out, "%7s", "p");
    for (size_t j = 0; j < g->nbytes; j++) {
        char sz[32];
        size_text(g->bytes[j], sz, sizeof sz);
        fprintf(out, " | %*s", width, sz);
    }
    fprintf(out, "\n");
}

int compare_schedules(const sched_lib *lib, const compare_grid *g, const sim_model *m, FILE *out, diag *d)
{
    size_t ns = 0;
    const sched_def **scheds = malloc((lib_count(lib) + 1) * sizeof *scheds);
    double *t = malloc((lib_count(lib) + 1) * g->nps * g->nbytes * sizeof *t + 1);
    if (!scheds || !t) {
        free(scheds);
        free(t);
        diag_error(d, NULL, (loc){0, 0}, "out of memory");
        return -1;
    }
    int c = collective_from_name(g->collective);
    int reduces = collective_reduces(c);
    for (size_t i = 0; i < lib_count(lib); i++) {
        const sched_def *s = lib_at(lib, i);
        if (s->collective && !strcmp(s->collective, g->collective) && (g->commutative || s->ordered || !reduces)) scheds[ns++] = s;
    }
    int rc = ns ? 0 : -1;
    if (!ns) diag_error(d, NULL, (loc){0, 0}, "no schedule implements %s%s", g->collective, g->commutative ? "" : " in rank order");
    int width = 12;
    for (size_t k = 0; k < ns; k++) {
        int w = (int)strlen(short_name(scheds[k], g->collective)) + 11;
        if (w > width) width = w;
    }
    /* every cell, every schedule */
    for (size_t k = 0; k < ns && rc == 0; k++)
        for (size_t i = 0; i < g->nps && rc == 0; i++)
            for (size_t j = 0; j < g->nbytes && rc == 0; j++) {
                double *cell = &t[(k * g->nps + i) * g->nbytes + j];
                *cell = NAN;
                if (g->bytes[j] % g->esize) continue;
                sim_args a = {.p = g->ps[i], .count = g->bytes[j] / g->esize, .esize = g->esize, .inplace = g->inplace,
                              .commutative = g->commutative, .nbufs = g->nbufs};
                sim_result r;
                int s = simulate_schedule(lib, scheds[k], &a, m, NULL, &r, d);
                if (s == SIM_FAIL) rc = -1;
                if (s == SIM_OK) {
                    *cell = r.time;
                    sim_result_free(&r);
                }
            }
    if (rc == 0) {
        fprintf(out, "%s over p and message size (type %s, %s op%s), ", g->collective, g->type_name,
                g->commutative ? "commutative" : "non-commutative", g->inplace ? ", in place" : "");
        sim_model_print(m, out);
        fprintf(out, "\n\nwinner, and its predicted time:\n");
        header(g, width, out);
        for (size_t i = 0; i < g->nps; i++) {
            fprintf(out, "%7" PRId64, g->ps[i]);
            for (size_t j = 0; j < g->nbytes; j++) {
                size_t best = ns;
                for (size_t k = 0; k < ns; k++) {
                    double x = t[(k * g->nps + i) * g->nbytes + j];
                    if (!isnan(x) && (best == ns || x < t[(best * g->nps + i) * g->nbytes + j])) best = k;
                }
                char cell[96] = "-", tm[32];
                if (best < ns) {
                    sim_format_time(t[(best * g->nps + i) * g->nbytes + j], tm, sizeof tm);
                    snprintf(cell, sizeof cell, "%s %s", short_name(scheds[best], g->collective), tm);
                }
                fprintf(out, " | %*s", width, cell);
            }
            fprintf(out, "\n");
        }
        for (size_t k = 0; k < ns; k++) {
            fprintf(out, "\n%s:\n", scheds[k]->name);
            header(g, width, out);
            for (size_t i = 0; i < g->nps; i++) {
                fprintf(out, "%7" PRId64, g->ps[i]);
                for (size_t j = 0; j < g->nbytes; j++) {
                    double x = t[(k * g->nps + i) * g->nbytes + j];
                    char tm[32] = "-";
                    if (!isnan(x)) sim_format_time(x, tm, sizeof tm);
                    fprintf(out, " | %*s", width, tm);
                }
                fprintf(out, "\n");
            }
        }
        fprintf(out, "\n(-: the schedule's requirements fail there, or the size is not a whole number of elements)\n");
    }
    free(scheds);
    free(t);
    return rc;
}
