#include "draw.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t rank, round;
    double start, end;
    uint64_t reduced, copied;
} box;

typedef struct {
    uint32_t src, src_round, dst, dst_round;
    double sent, arrived;
    uint64_t bytes;
    int flag;            /* a SIGNAL (shared memory), not a message: no bytes */
} arrow;

typedef struct {
    box *boxes;
    size_t nboxes, capboxes;
    arrow *arrows;
    size_t narrows, caparrows;
    int nomem;
} picture;

static void *grow(picture *pic, void *v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return v;
    size_t c = *cap ? *cap * 2 : 64;
    void *t = realloc(v, c * elem);
    if (!t) {
        pic->nomem = 1;
        return v;
    }
    *cap = c;
    return t;
}

static void on_round(void *ctx, uint32_t rank, uint32_t round, double start, double end, uint64_t reduced, uint64_t copied)
{
    picture *pic = ctx;
    pic->boxes = grow(pic, pic->boxes, &pic->capboxes, pic->nboxes, sizeof *pic->boxes);
    if (pic->nboxes < pic->capboxes) pic->boxes[pic->nboxes++] = (box){rank, round, start, end, reduced, copied};
}

static void on_message(void *ctx, uint32_t src, uint32_t src_round, double sent, uint32_t dst, uint32_t dst_round,
                       double arrived, uint64_t bytes)
{
    picture *pic = ctx;
    pic->arrows = grow(pic, pic->arrows, &pic->caparrows, pic->narrows, sizeof *pic->arrows);
    if (pic->narrows < pic->caparrows) pic->arrows[pic->narrows++] = (arrow){src, src_round, dst, dst_round, sent, arrived, bytes, 0};
}

static void on_flag(void *ctx, uint32_t src, uint32_t src_round, double raised, uint32_t dst, uint32_t dst_round, double seen)
{
    on_message(ctx, src, src_round, raised, dst, dst_round, seen, 0);
    picture *pic = ctx;
    if (pic->narrows && !pic->nomem) pic->arrows[pic->narrows - 1].flag = 1;
}

static void size_text(uint64_t b, char *out, size_t size)
{
    if (b >= (1u << 20) && b % (1u << 20) == 0) snprintf(out, size, "%" PRIu64 " MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0) snprintf(out, size, "%" PRIu64 " KiB", b >> 10);
    else snprintf(out, size, "%" PRIu64 " B", b);
}

static void xml_text(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*s, out);
        }
    }
}

static uint32_t steps_of(const picture *pic)
{
    double last = 0;
    for (size_t i = 0; i < pic->nboxes; i++)
        if (pic->boxes[i].end > last) last = pic->boxes[i].end;
    return (uint32_t)(last + 0.5);
}

static int by_rank_round(const void *x, const void *y)
{
    const box *a = x, *b = y;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->round > b->round) - (a->round < b->round);
}

/* ---- SVG ---- */

enum { LEFT = 80, TOP = 70, COL = 120, ROW = 64, BOX = 40, BOTTOM = 50 };

static double xs(double step) { return LEFT + step * COL; }
static double ymid(uint32_t rank) { return TOP + rank * ROW + ROW / 2.0; }

static void svg(picture *pic, const char *title, int64_t p, FILE *out)
{
    uint32_t steps = steps_of(pic);
    double width = xs(steps) + 30, height = TOP + (double)p * ROW + BOTTOM;
    int flags = 0; /* shared memory: signals drawn dashed, and said so in the legend */
    for (size_t i = 0; i < pic->narrows; i++) flags |= pic->arrows[i].flag;
    double text_width = LEFT + 9.0 * (double)strlen(title) + 20; /* about 9 px a character at 15 px bold */
    if (width < text_width) width = text_width;
    if (width < 760) width = 760; /* the legend */
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                 "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n", width, height, width, height);
    fprintf(out, "  <defs>\n    <marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
                 "orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#2d4a7a\"/></marker>\n%s  </defs>\n",
            flags ? "    <marker id=\"flaghead\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
                    "orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#b35900\"/></marker>\n" : "");
    fprintf(out, "  <rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(out, "  <text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", LEFT);
    xml_text(out, title);
    fprintf(out, "</text>\n");
    for (uint32_t c = 0; c < steps; c++) {
        fprintf(out, "  <text x=\"%.0f\" y=\"%d\" font-size=\"11\" fill=\"#666\" text-anchor=\"middle\">step %u</text>\n",
                xs(c + 0.5), TOP - 10, c);
        fprintf(out, "  <line x1=\"%.0f\" y1=\"%d\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", xs(c), TOP - 4, xs(c),
                height - BOTTOM + 4);
    }
    fprintf(out, "  <line x1=\"%.0f\" y1=\"%d\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", xs(steps), TOP - 4, xs(steps),
            height - BOTTOM + 4);
    for (int64_t r = 0; r < p; r++) {
        fprintf(out, "  <text x=\"%d\" y=\"%.0f\" font-size=\"12\" text-anchor=\"end\" dominant-baseline=\"middle\">rank %" PRId64 "</text>\n",
                LEFT - 12, ymid((uint32_t)r), r);
        fprintf(out, "  <line x1=\"%d\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#bbb\" stroke-dasharray=\"3 3\"/>\n", LEFT,
                ymid((uint32_t)r), xs(steps), ymid((uint32_t)r));
    }
    for (size_t i = 0; i < pic->nboxes; i++) {
        const box *b = &pic->boxes[i];
        double x = xs(b->start) + 6, w = (b->end - b->start) * COL - 12, y = ymid(b->rank) - BOX / 2.0;
        fprintf(out, "  <rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%d\" rx=\"6\" fill=\"#eef3fb\" stroke=\"#7a93bd\"/>\n", x, y,
                w, BOX);
        fprintf(out, "  <text x=\"%.0f\" y=\"%.0f\" font-size=\"9\" fill=\"#556\">round %u</text>\n", x + 5, y + 11, b->round);
        char sz[32];
        double ty = y + BOX - 6;
        if (b->reduced) {
            size_text(b->reduced, sz, sizeof sz);
            fprintf(out, "  <text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" fill=\"#a11\">&#x2295; %s</text>\n", x + 5, ty, sz);
        }
        if (b->copied) {
            size_text(b->copied, sz, sizeof sz);
            fprintf(out, "  <text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" fill=\"#171\" text-anchor=\"end\">copy %s</text>\n", x + w - 5,
                    ty, sz);
        }
    }
    qsort(pic->boxes, pic->nboxes, sizeof *pic->boxes, by_rank_round);
    for (size_t i = 0; i < pic->narrows; i++) {
        const arrow *a = &pic->arrows[i];
        double x1 = xs(a->sent) + COL * 0.22, x2 = xs(a->arrived) - COL * 0.22, y1 = ymid(a->src), y2 = ymid(a->dst);
        /* end inside the round that receives it, which may start after the message arrived */
        box key = {.rank = a->dst, .round = a->dst_round};
        const box *in = bsearch(&key, pic->boxes, pic->nboxes, sizeof *pic->boxes, by_rank_round);
        if (in && x2 < xs(in->start) + 16) x2 = xs(in->start) + 16;
        char sz[32];
        size_text(a->bytes, sz, sizeof sz);
        if (a->flag) snprintf(sz, sizeof sz, "signal");
        const char *color = a->flag ? "#b35900" : "#2d4a7a";
        if (a->src == a->dst) y2 += 8; /* to itself: keep it visible */
        fprintf(out, "  <line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%s\"%s marker-end=\"url(#%s)\"/>\n",
                x1, y1, x2, y2, color, a->flag ? "1" : "1.4", a->flag ? " stroke-dasharray=\"5 3\"" : "", a->flag ? "flaghead" : "head");
        fprintf(out, "  <text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" fill=\"%s\" text-anchor=\"middle\" stroke=\"white\" "
                     "stroke-width=\"3\" paint-order=\"stroke\">%s</text>\n",
                x1 + 0.35 * (x2 - x1), y1 + 0.35 * (y2 - y1) - 3, color, sz); /* off the middle, where exchanges cross */
    }
    fprintf(out, "  <text x=\"%d\" y=\"%.0f\" font-size=\"11\" fill=\"#444\">boxes: rounds; arrows: messages (size); "
                 "<tspan fill=\"#a11\">&#x2295;</tspan> bytes reduced; <tspan fill=\"#171\">copy</tspan> bytes copied; "
                 "steps: unit latency, free bandwidth</text>\n",
            LEFT, height - 18);
    if (flags)
        fprintf(out, "  <text x=\"%d\" y=\"%.0f\" font-size=\"11\" fill=\"#444\"><tspan fill=\"#b35900\">dashed: signals</tspan> "
                     "between ranks on one node (shared memory, no data); copies and reductions count whoever's buffers they name</text>\n",
                LEFT, height - 4);
    fprintf(out, "</svg>\n");
}

/* ---- dot ---- */

static void dot(const picture *pic, const char *title, FILE *out)
{
    fprintf(out, "digraph schedule {\n  label=\"");
    for (const char *s = title; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc(*s, out);
    }
    fprintf(out, "\";\n  labelloc=t;\n  rankdir=LR;\n  node [shape=box, style=rounded, fontsize=10];\n");
    uint32_t steps = steps_of(pic);
    for (size_t i = 0; i < pic->nboxes; i++) {
        const box *b = &pic->boxes[i];
        char red[40] = "", cop[40] = "", sz[32];
        if (b->reduced) size_text(b->reduced, sz, sizeof sz), snprintf(red, sizeof red, "\\n\u2295 %s", sz);
        if (b->copied) size_text(b->copied, sz, sizeof sz), snprintf(cop, sizeof cop, "\\ncopy %s", sz);
        fprintf(out, "  r%u_%u [label=\"rank %u, round %u%s%s\"];\n", b->rank, b->round, b->rank, b->round, red, cop);
    }
    for (uint32_t c = 0; c <= steps; c++) { /* rounds starting at one step line up */
        int any = 0;
        for (size_t i = 0; i < pic->nboxes; i++)
            if ((uint32_t)(pic->boxes[i].start + 0.5) == c) {
                fprintf(out, "%s r%u_%u;", any ? "" : "  { rank=same;", pic->boxes[i].rank, pic->boxes[i].round);
                any = 1;
            }
        if (any) fprintf(out, " }\n");
    }
    for (size_t i = 0; i < pic->nboxes; i++) {
        const box *b = &pic->boxes[i];
        if (b->round > 0) fprintf(out, "  r%u_%u -> r%u_%u [style=dotted, arrowhead=none];\n", b->rank, b->round - 1, b->rank, b->round);
    }
    for (size_t i = 0; i < pic->narrows; i++) {
        const arrow *a = &pic->arrows[i];
        char sz[32];
        size_text(a->bytes, sz, sizeof sz);
        if (a->flag)
            fprintf(out, "  r%u_%u -> r%u_%u [label=\"signal\", color=\"#b35900\", style=dashed, fontsize=9];\n", a->src, a->src_round,
                    a->dst, a->dst_round);
        else
            fprintf(out, "  r%u_%u -> r%u_%u [label=\"%s\", color=\"#2d4a7a\", fontsize=9];\n", a->src, a->src_round, a->dst,
                    a->dst_round, sz);
    }
    fprintf(out, "}\n");
}

/* ---- text ---- */

static void text(const picture *pic, const char *title, int64_t p, FILE *out)
{
    uint32_t steps = steps_of(pic);
    fprintf(out, "%s\n", title);
    uint64_t *m = calloc((size_t)(p * p), sizeof *m);
    if (!m) return;
    for (uint32_t c = 0; c < steps; c++) {
        memset(m, 0, (size_t)(p * p) * sizeof *m);
        uint64_t total = 0, n = 0, widest = 1, nflags = 0;
        for (size_t i = 0; i < pic->narrows; i++) {
            const arrow *a = &pic->arrows[i];
            if ((uint32_t)(a->sent + 0.5) != c) continue;
            if (a->flag) {
                nflags++;
                continue;
            }
            m[a->src * p + a->dst] += a->bytes;
            total += a->bytes;
            n++;
        }
        for (int64_t i = 0; i < p * p; i++)
            if (m[i] > widest) widest = m[i];
        int w = snprintf(NULL, 0, "%" PRIu64, widest) + 1;
        if (w < 4) w = 4;
        uint64_t reduced = 0, copied = 0;
        for (size_t i = 0; i < pic->nboxes; i++)
            if ((uint32_t)(pic->boxes[i].start + 0.5) == c) reduced += pic->boxes[i].reduced, copied += pic->boxes[i].copied;
        fprintf(out, "\nstep %u: %" PRIu64 " messages, %" PRIu64 " bytes; %" PRIu64 " bytes reduced, %" PRIu64 " copied", c, n, total,
                reduced, copied);
        if (nflags) fprintf(out, "; %" PRIu64 " signals", nflags);
        fprintf(out, "\n");
        if (!n) continue;
        fprintf(out, "%9s", "from\\to");
        for (int64_t d = 0; d < p; d++) fprintf(out, "%*" PRId64, w, d);
        fprintf(out, "\n");
        for (int64_t s = 0; s < p; s++) {
            fprintf(out, "%9" PRId64, s);
            for (int64_t d = 0; d < p; d++) {
                if (m[s * p + d]) fprintf(out, "%*" PRIu64, w, m[s * p + d]);
                else fprintf(out, "%*s", w, ".");
            }
            fprintf(out, "\n");
        }
    }
    free(m);
}

int draw_schedule(const sched_lib *lib, const sched_def *s, const sim_args *a, const char *type_name, draw_format format,
                  FILE *out, diag *d)
{
    if (a->p > 1024) {
        diag_error(d, s->src, s->at, "too many ranks to draw (%lld; at most 1024)", (long long)a->p);
        return -1;
    }
    sim_model unit = {.alpha = 1, .min_round = 1, .any_port = 1};
    picture pic = {0};
    sim_hooks hooks = {&pic, on_round, on_message, on_flag};
    sim_args args = *a;
    args.record_hops = 0;
    sim_result res;
    int rc = simulate_schedule(lib, s, &args, &unit, &hooks, &res, d);
    if (rc == SIM_SKIP) diag_error(d, s->src, s->at, "'%s' does not apply for p = %lld, count = %lld (its requirements fail)", s->name,
                                   (long long)a->p, (long long)a->count);
    if (rc == SIM_OK && pic.nomem) diag_error(d, s->src, s->at, "out of memory drawing '%s'", s->name);
    if (rc == SIM_OK && !pic.nomem) {
        char title[300], flags[40] = "";
        if (res.flags) snprintf(flags, sizeof flags, ", %" PRIu64 " signals", res.flags);
        snprintf(title, sizeof title, "%s: p = %lld, count = %lld (%s%s), %u rounds, %" PRIu64 " messages, %" PRIu64 " bytes%s", s->name,
                 (long long)a->p, (long long)a->count, type_name, a->inplace ? ", in place" : "", res.nrounds, res.messages, res.bytes,
                 flags);
        if (format == DRAW_SVG) svg(&pic, title, a->p, out);
        else if (format == DRAW_DOT) dot(&pic, title, out);
        else text(&pic, title, a->p, out);
    }
    if (rc == SIM_OK) sim_result_free(&res);
    free(pic.boxes);
    free(pic.arrows);
    return rc == SIM_OK && !pic.nomem ? 0 : -1;
}
