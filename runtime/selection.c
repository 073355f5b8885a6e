#include "selection.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int coll;
    int64_t p_lo, p_hi;        /* p in [p_lo, p_hi) */
    int64_t b_lo, b_hi;        /* bytes in [b_lo, b_hi) */
    int64_t n_lo, n_hi;        /* nodes in [n_lo, n_hi) */
    int64_t k_lo, k_hi;        /* ppn (the largest node's ranks) in [k_lo, k_hi) */
    signed char commutative, inplace, pow2; /* -1: either; 0 or 1: must be */
    int fallback;
    sched_choice choice;
    char where[96];            /* "file:line", for explanations */
    char text[160];            /* the rule as written */
} rule;

struct rule_table {
    rule *r;
    size_t n, cap;
};

rule_table *rules_create(void) { return calloc(1, sizeof(rule_table)); }

void rules_destroy(rule_table *t)
{
    if (t) free(t->r);
    free(t);
}

size_t rules_count(const rule_table *t) { return t->n; }

const sched_def *select_find(const sched_lib *lib, nbc_collective c, const char *name)
{
    const sched_def *s = lib_find(lib, name);
    if (!s) {
        char full[300];
        snprintf(full, sizeof full, "%s_%s", collective_names[c], name);
        s = lib_find(lib, full);
    }
    return s && s->collective && !strcmp(s->collective, collective_names[c]) ? s : NULL;
}

/* ---- parsing ---- */

typedef struct {
    const char *name;
    int line;
    diag *d;
    int bad;
} reader;

static void complain(reader *rd, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    diag_append(rd->d, "%s:%d: error: %s\n", rd->name, rd->line, msg);
    rd->d->errors++;
    rd->bad = 1;
}

/* A decimal integer, nothing else (no spaces, signs of its own, hex or octal): -1 when tok is
 * not one, -2 when it is outside [lo, hi]. */
static int number(const char *tok, int64_t lo, int64_t hi, int64_t *out)
{
    const char *digits = tok + (tok[0] == '-');
    if (!*digits || strspn(digits, "0123456789") != strlen(digits)) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(tok, &end, 10);
    if (errno == ERANGE || v < lo || v > hi) return -2;
    *out = v;
    return 0;
}

/* Conditions compare with numbers in these ranges, so v + 1 below cannot overflow. */
#define RULE_MAX_P INT32_MAX
#define RULE_MAX_BYTES COMPILE_MAX_BYTES

/* "p < 4": narrows [lo, hi). */
static int bound(const char *op, int64_t v, int64_t *lo, int64_t *hi)
{
    if (!strcmp(op, "<")) *hi = v < *hi ? v : *hi;
    else if (!strcmp(op, "<=")) *hi = v + 1 < *hi ? v + 1 : *hi;
    else if (!strcmp(op, ">=")) *lo = v > *lo ? v : *lo;
    else if (!strcmp(op, ">")) *lo = v + 1 > *lo ? v + 1 : *lo;
    else if (!strcmp(op, "==")) *lo = v > *lo ? v : *lo, *hi = v + 1 < *hi ? v + 1 : *hi;
    else return -1;
    return 0;
}

int select_parse_choice(const sched_lib *lib, nbc_collective c, const char *spec, sched_choice *out, char *err,
                        size_t errsize)
{
    memset(out, 0, sizeof *out);
    char name[128];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, spec, len);
    name[len] = '\0';
    out->s = select_find(lib, c, name);
    if (!out->s) {
        if (lib_find(lib, name)) snprintf(err, errsize, "schedule '%s' does not implement %s", name, collective_names[c]);
        else snprintf(err, errsize, "no %s schedule is named '%s'", collective_names[c], name);
        return -1;
    }
    for (const char *p = colon; p && *p; p = strchr(p, ',')) {
        p++;
        const char *eq = strchr(p, '=');
        const char *end = strchr(p, ',');
        size_t nl = eq ? (size_t)(eq - p) : 0;
        char value[32];
        size_t vl = eq ? (end ? (size_t)(end - eq - 1) : strlen(eq + 1)) : 0;
        if (!eq || (end && end < eq) || !nl || nl >= sizeof out->names[0] || !vl || vl >= sizeof value) {
            snprintf(err, errsize, "bad parameters in '%s' (write name=value,name=value)", spec);
            return -1;
        }
        if (out->nparams == COMPILE_MAX_PARAMS) {
            snprintf(err, errsize, "too many parameters in '%s'", spec);
            return -1;
        }
        char *pname = out->names[out->nparams];
        memcpy(pname, p, nl);
        pname[nl] = '\0';
        memcpy(value, eq + 1, vl);
        value[vl] = '\0';
        int known = 0;
        for (const node *q = out->s->params; q; q = q->next) known |= !strcmp(q->name, pname);
        if (!known) {
            snprintf(err, errsize, "the schedule has no parameter '%s'", pname);
            return -1;
        }
        int bad = number(value, INT64_MIN, INT64_MAX, &out->values[out->nparams]);
        if (bad) {
            snprintf(err, errsize, bad == -1 ? "'%s' is not a number" : "'%s' is out of range", value);
            return -1;
        }
        out->nparams++;
    }
    return 0;
}

void select_apply_choice(const sched_choice *ch, compile_args *a)
{
    a->nparams = ch->nparams;
    for (int k = 0; k < ch->nparams; k++) a->params[k].name = ch->names[k], a->params[k].value = ch->values[k];
}

/* One line, split into words; returns 1 when it held a rule. */
static int parse_rule(reader *rd, const sched_lib *lib, char *line, rule *r)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *w[64];
    int n = 0;
    for (char *save, *tok = strtok_r(line, " \t\r", &save); tok && n < 64; tok = strtok_r(NULL, " \t\r", &save))
        w[n++] = tok;
    if (n == 0) return 0;
    *r = (rule){.p_hi = INT64_MAX, .b_hi = INT64_MAX, .n_hi = INT64_MAX, .k_hi = INT64_MAX,
                .commutative = -1, .inplace = -1, .pow2 = -1};
    r->coll = collective_from_name(w[0]);
    if (r->coll < 0) {
        complain(rd, "unknown collective '%s'", w[0]);
        return 0;
    }
    int i = 1;
    for (; i < n && strcmp(w[i], "->"); i++) {
        static const char *const flags[] = {"commutative", "inplace", "pow2"};
        signed char *slot[] = {&r->commutative, &r->inplace, &r->pow2};
        int neg = w[i][0] == '!', k = -1;
        for (int f = 0; f < 3; f++)
            if (!strcmp(w[i] + neg, flags[f])) k = f;
        if (k >= 0) {
            *slot[k] = (signed char)!neg;
        } else if (!strcmp(w[i], "fallback")) {
            r->fallback = 1;
        } else if ((!strcmp(w[i], "p") || !strcmp(w[i], "bytes") || !strcmp(w[i], "nodes") || !strcmp(w[i], "ppn")) &&
                   i + 2 < n) {
            int64_t v;
            int is_bytes = w[i][0] == 'b';
            char what = w[i][0] == 'p' && w[i][1] ? 'k' : w[i][0]; /* p, bytes, nodes, ppn (k) */
            int64_t *lo = what == 'b' ? &r->b_lo : what == 'n' ? &r->n_lo : what == 'k' ? &r->k_lo : &r->p_lo;
            int64_t *hi = what == 'b' ? &r->b_hi : what == 'n' ? &r->n_hi : what == 'k' ? &r->k_hi : &r->p_hi;
            int bad = number(w[i + 2], 0, is_bytes ? RULE_MAX_BYTES : RULE_MAX_P, &v);
            if (bad == -2) {
                char msg[160];
                snprintf(msg, sizeof msg, "%.40s in a condition on %s is outside 0 .. %lld", w[i + 2], w[i],
                         (long long)(is_bytes ? RULE_MAX_BYTES : RULE_MAX_P));
                complain(rd, "%s", msg);
                return 0;
            }
            if (bad || bound(w[i + 1], v, lo, hi)) {
                complain(rd, "bad condition near '%s' (write p < 4, bytes >= 8192, nodes >= 2, ...)", w[i]);
                return 0;
            }
            i += 2;
        } else {
            complain(rd, "unknown condition '%s'", w[i]);
            return 0;
        }
    }
    if (i + 2 != n) {
        complain(rd, "%s", i == n ? "expected '-> schedule'" : "expected one schedule after '->'");
        return 0;
    }
    char err[256];
    if (select_parse_choice(lib, (nbc_collective)r->coll, w[i + 1], &r->choice, err, sizeof err)) {
        complain(rd, "%s", err);
        return 0;
    }
    snprintf(r->where, sizeof r->where, "%s:%d", rd->name, rd->line);
    return 1;
}

int rules_add(rule_table *t, const sched_lib *lib, const char *name, const char *text, size_t len, int replace, diag *d)
{
    reader rd = {.name = name, .d = d};
    rule *fresh = NULL;
    size_t nfresh = 0, cap = 0;
    char line[1024], copy[1024];
    for (size_t at = 0; at < len;) {
        rd.line++;
        size_t end = at;
        while (end < len && text[end] != '\n') end++;
        size_t l = end - at < sizeof line - 1 ? end - at : sizeof line - 1;
        memcpy(line, text + at, l);
        line[l] = '\0';
        memcpy(copy, line, l + 1); /* parse_rule cuts line into words */
        at = end + 1;
        rule r;
        if (!parse_rule(&rd, lib, line, &r)) continue;
        char *c = copy;
        while (*c == ' ' || *c == '\t') c++;
        snprintf(r.text, sizeof r.text, "%.159s", c);
        if (nfresh == cap) {
            cap = cap ? cap * 2 : 64;
            rule *g = realloc(fresh, cap * sizeof *g);
            if (!g) {
                free(fresh);
                diag_error(d, NULL, (loc){0, 0}, "%s: out of memory", name);
                return -1;
            }
            fresh = g;
        }
        fresh[nfresh++] = r;
    }
    if (rd.bad) {
        free(fresh);
        return -1;
    }
    /* new rules first; with replace, of the old ones only the fallbacks stay */
    size_t keep = 0;
    for (size_t i = 0; i < t->n; i++)
        if (!replace || t->r[i].fallback) t->r[keep++] = t->r[i];
    rule *all = malloc((keep + nfresh + 1) * sizeof *all);
    if (!all) {
        free(fresh);
        diag_error(d, NULL, (loc){0, 0}, "%s: out of memory", name);
        return -1;
    }
    if (nfresh) memcpy(all, fresh, nfresh * sizeof *all);
    if (keep) memcpy(all + nfresh, t->r, keep * sizeof *all);
    free(fresh);
    free(t->r);
    t->r = all;
    t->n = t->cap = keep + nfresh;
    return 0;
}

int rules_load_file(rule_table *t, const sched_lib *lib, const char *path, diag *d)
{
    size_t len;
    char *text = lib_read_file(path, &len, d);
    if (!text) return -1;
    int replace = 0;
    for (size_t i = 0; i + 7 <= len; i++)
        if ((i == 0 || text[i - 1] == '\n') && !strncmp(text + i, "replace", 7) &&
            (i + 7 == len || text[i + 7] == '\n' || text[i + 7] == '\r')) {
            replace = 1;
            memset(text + i, ' ', 7); /* the rest of the file is rules */
        }
    int rc = rules_add(t, lib, path, text, len, replace, d);
    free(text);
    return rc;
}

/* ---- choosing ---- */

/* The call's number of nodes and its largest node's ranks (compile_args.node_of; without a
 * map one node when the ranks share memory, else one node a rank, as the compiler sees it). */
static void topology_shape(const compile_args *a, int64_t *nodes, int64_t *ppn)
{
    if (!a->node_of) {
        *nodes = a->shared_memory ? 1 : a->p;
        *ppn = a->shared_memory ? a->p : 1;
        return;
    }
    *nodes = 0, *ppn = 0;
    for (int64_t r = 0; r < a->p; r++)
        if (a->node_of[r] + 1 > *nodes) *nodes = a->node_of[r] + 1;
    for (int64_t j = 0; j < *nodes; j++) {
        int64_t k = 0;
        for (int64_t r = 0; r < a->p; r++) k += a->node_of[r] == j;
        if (k > *ppn) *ppn = k;
    }
}

static int matches(const rule *r, nbc_collective c, const compile_args *a, int64_t nodes, int64_t ppn)
{
    int64_t bytes; /* larger than any bound a rule can state: just above them all */
    if (__builtin_mul_overflow(a->count, a->esize, &bytes) || bytes > RULE_MAX_BYTES) bytes = RULE_MAX_BYTES + 1;
    int pow2 = (a->p & (a->p - 1)) == 0;
    return r->coll == (int)c && a->p >= r->p_lo && a->p < r->p_hi && bytes >= r->b_lo && bytes < r->b_hi &&
           nodes >= r->n_lo && nodes < r->n_hi && ppn >= r->k_lo && ppn < r->k_hi &&
           (r->commutative < 0 || r->commutative == !!a->commutative) &&
           (r->inplace < 0 || r->inplace == !!a->inplace) && (r->pow2 < 0 || r->pow2 == pow2);
}

/* Whether s (with the rule's parameters) can serve the call; the reason goes to why. */
static int eligible(const sched_lib *lib, const sched_def *s, compile_args *a, diag *why)
{
    diag d;
    diag_init(&d);
    int rc = compile_check(lib, s, a, &d);
    if (rc != COMPILE_OK && why) {
        const char *msg = d.text ? strstr(d.text, "error: ") : NULL;
        const char *end = msg ? strchr(msg, '\n') : NULL;
        diag_append(why, "    not eligible: %.*s\n", msg ? (int)(end - msg - 7) : 0, msg ? msg + 7 : "");
    }
    diag_free(&d);
    return rc == COMPILE_OK;
}

static const sched_def *by_rules(const sched_lib *lib, const rule_table *t, nbc_collective c, compile_args *a, diag *why)
{
    int64_t nodes, ppn;
    topology_shape(a, &nodes, &ppn);
    for (int pass = 0; pass < 2; pass++) { /* the first matching rule, then the fallbacks */
        for (size_t i = 0; i < t->n; i++) {
            const rule *r = &t->r[i];
            if (r->fallback != pass || !matches(r, c, a, nodes, ppn)) continue;
            select_apply_choice(&r->choice, a);
            if (why) diag_append(why, "  %s %s: %s\n", pass ? "fallback" : "rule", r->where, r->text);
            if (eligible(lib, r->choice.s, a, why)) return r->choice.s;
            a->nparams = 0;
            if (!pass) break; /* the first match decides, or the fallbacks do */
        }
    }
    return NULL;
}

static const sched_def *by_model(const sched_lib *lib, const sim_model *m, nbc_collective c, compile_args *a, diag *why)
{
    const sched_def *best = NULL;
    double best_t = 0;
    a->nparams = 0;
    for (size_t i = 0; i < lib_count(lib); i++) {
        const sched_def *s = lib_at(lib, i);
        if (!s->collective || strcmp(s->collective, collective_names[c]) != 0) continue;
        if (!eligible(lib, s, a, NULL)) continue;
        sim_args sa = {.p = a->p, .count = a->count, .esize = a->esize, .root = a->root, .inplace = a->inplace,
                       .commutative = a->commutative, .shared_memory = a->shared_memory, .node_of = a->node_of};
        sim_result res;
        diag d;
        diag_init(&d);
        int rc = simulate_schedule(lib, s, &sa, m, NULL, &res, &d);
        diag_free(&d);
        if (rc != SIM_OK) continue;
        char when[32];
        sim_format_time(res.time, when, sizeof when);
        if (why) diag_append(why, "  %-36s %s\n", s->name, when);
        if (!best || res.time < best_t) best = s, best_t = res.time;
        sim_result_free(&res);
    }
    return best;
}

const sched_def *select_choose(const sched_lib *lib, const rule_table *t, select_mode mode, const sim_model *m,
                               nbc_collective c, compile_args *a, diag *why)
{
    /* the vector collectives' counts differ between ranks: a model's estimate from this rank's
     * would not be the same everywhere, while their rules look at p and the op alone */
    if (collective_has_vectors(c)) mode = SELECT_RULES;
    const sched_def *s = mode == SELECT_MODEL ? by_model(lib, m, c, a, why) : by_rules(lib, t, c, a, why);
    if (why && !s) diag_append(why, "  no schedule is eligible\n");
    if (why && s) { /* as a rule or nbc_set_schedule would name it */
        diag_append(why, "  chosen: %s", s->name);
        for (int i = 0; i < a->nparams; i++)
            diag_append(why, "%c%s=%lld", i ? ',' : ':', a->params[i].name, (long long)a->params[i].value);
        diag_append(why, "\n");
    }
    return s;
}
