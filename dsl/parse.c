/* dsl_parse: runs the flex scanner and bison parser over one file, then checks what the
 * grammar cannot (duplicate schedule names). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "collectives.h"
#include "parse_ctx.h"
#include "parser.h"
#define YYSTYPE DSL_YYSTYPE
#define YYLTYPE parse_loc
#include "lexer.h"

void parse_error(parse_ctx *ctx, parse_loc at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(ctx->d, &ctx->file->src, (loc){at.first_line, at.first_column}, "%s", msg);
}

void parse_check_collective(parse_ctx *ctx, const char *name, parse_loc at)
{
    if (collective_from_name(name) >= 0) return;
    char known[256] = "";
    for (int i = 0; i < COLL_COUNT_; i++) {
        strcat(known, i ? ", " : "");
        strcat(known, collective_names[i]);
    }
    parse_error(ctx, at, "unknown collective '%s' (known: %s)", name, known);
}

_Noreturn void parse_fatal(parse_ctx *ctx, const char *msg)
{
    diag_error(ctx->d, &ctx->file->src, (loc){0, 0}, "the scanner failed: %s", msg);
    longjmp(ctx->fatal, 1);
}

/* The scanner and the parser over text; bison's status (2: out of memory or too deep). After
 * a fatal scanner error what the parser held is lost, but the file's arena still frees the
 * tree. */
static int scan_and_parse(parse_ctx *ctx, const char *text, size_t len)
{
    yyscan_t scanner;
    if (dsl_yylex_init_extra(ctx, &scanner) != 0) return 2;
    volatile int rc = 2;
    if (setjmp(ctx->fatal) == 0) {
        YY_BUFFER_STATE buf = dsl_yy_scan_bytes(text, (int)len, scanner);
        rc = dsl_yyparse(scanner, ctx);
        dsl_yy_delete_buffer(buf, scanner);
    } else {
        ctx->failed = 1;
    }
    dsl_yylex_destroy(scanner);
    return rc;
}

ast_file *dsl_parse(const char *name, const char *text, size_t len, diag *d)
{
    int errors_before = d->errors;
    if (len > DSL_MAX_SOURCE) { /* flex counts in int; files are far smaller (lib_read_file) */
        diag_error(d, NULL, (loc){0, 0}, "%s: %zu bytes is larger than a schedule source may be (%d MiB)", name, len,
                   DSL_MAX_SOURCE >> 20);
        return NULL;
    }
    ast_file *f = calloc(1, sizeof *f);
    char *copy = malloc(len + 1);
    if (!f || !copy) {
        free(f);
        free(copy);
        diag_error(d, NULL, (loc){0, 0}, "%s: out of memory", name);
        return NULL;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    f->src.text = copy;
    f->src.len = len;
    f->src.name = ast_strdup(f, name, strlen(name));
    if (!f->src.name) f->src.name = "?";

    parse_ctx ctx = {.file = f, .d = d, .line = 1, .col = 1};
    int rc = scan_and_parse(&ctx, copy, len);
    if ((rc == 2 && !ctx.too_deep && !ctx.failed) || ctx.nomem)
        diag_error(d, &f->src, (loc){0, 0}, "out of memory while parsing");

    for (sched_def *s = f->schedules; s; s = s->next)
        for (sched_def *t = f->schedules; t != s; t = t->next)
            if (strcmp(s->name, t->name) == 0) {
                diag_error(d, &f->src, s->at, "schedule '%s' is defined twice", s->name);
                diag_append(d, "%s:%d:%d: note: first defined here\n", f->src.name, t->at.line, t->at.col);
            }
    if (d->errors > errors_before) {
        ast_free(f);
        return NULL;
    }
    return f;
}
