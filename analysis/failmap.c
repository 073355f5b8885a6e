#include "failmap.h"

#include <inttypes.h>
#include <string.h>

enum { LEFT = 80, TOP = 70, CELL = 28, BOTTOM = 90 };

static const char *color(const fail_case *c)
{
    if (!c->finishable) return "#d9534f";
    return c->need_elems ? "#f0ad4e" : "#5cb85c";
}

void fail_map_svg(const fail_model *m, const fail_summary *sum, const fail_case *cases, size_t ncases, FILE *out)
{
    uint32_t p = (uint32_t)m->base.p, cols = m->maxrounds;
    char title[256];
    snprintf(title, sizeof title, "%s: p = %u, count = %lld%s; rank stops at round k", m->s->name, p, (long long)m->base.count,
             m->base.inplace ? ", in place" : "");
    double width = LEFT + (double)cols * CELL + 30, height = TOP + (double)p * CELL + BOTTOM;
    if (width < 720) width = 720; /* the title and the legend */
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                 "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n", width, height, width, height);
    fprintf(out, "  <rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(out, "  <text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", LEFT, title); /* names are identifiers */
    fprintf(out, "  <text x=\"%d\" y=\"44\" font-size=\"12\" fill=\"#444\">the survivors can finish after %u of %u stops; "
                 "columns: round, rows: the rank that stops</text>\n", LEFT, sum->finishable, sum->cases);
    for (uint32_t k = 0; k < cols; k++)
        if (cols <= 40 || k % 5 == 0)
            fprintf(out, "  <text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#666\" text-anchor=\"middle\">%u</text>\n",
                    LEFT + (int)k * CELL + CELL / 2, TOP - 8, k);
    for (uint32_t r = 0; r < p; r++)
        if (p <= 40 || r % 4 == 0)
            fprintf(out, "  <text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\" dominant-baseline=\"middle\">rank %u</text>\n",
                    LEFT - 8, TOP + (int)r * CELL + CELL / 2, r);
    for (size_t i = 0; i < ncases; i++) {
        const fail_case *c = &cases[i];
        int x = LEFT + (int)c->k * CELL, y = TOP + (int)c->f * CELL;
        fprintf(out, "  <rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"white\"><title>rank %u stops at round %u: %s; "
                     "%" PRIu64 " elements final on some survivor; %" PRIu64 " survivor-elements are partial results with its data; "
                     "at least %" PRIu64 " elements in %u messages still to receive</title></rect>\n",
                x, y, CELL, CELL, color(c), c->f, c->k, c->finishable ? "the survivors can finish" : "a contribution is lost",
                c->final_elems, c->tainted_elems, c->need_elems, c->need_ranks);
        if (c->finishable && c->need_elems && c->need_elems < 1000)
            fprintf(out, "  <text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\" dominant-baseline=\"middle\">%" PRIu64 "</text>\n",
                    x + CELL / 2, y + CELL / 2, c->need_elems);
    }
    double ly = TOP + (double)p * CELL + 24;
    const char *what[3] = {"a contribution is lost", "finishable; number: elements the survivors must still receive (lower bound)",
                           "nothing to receive: each survivor holds or can compute its result"};
    const char *fill[3] = {"#d9534f", "#f0ad4e", "#5cb85c"};
    for (int i = 0; i < 3; i++) {
        fprintf(out, "  <rect x=\"%d\" y=\"%.0f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", LEFT, ly + i * 20 - 11, fill[i]);
        fprintf(out, "  <text x=\"%d\" y=\"%.0f\" font-size=\"12\">%s</text>\n", LEFT + 22, ly + i * 20, what[i]);
    }
    fprintf(out, "</svg>\n");
}
