/* What the lexer and the parser share while one file is parsed. */
#ifndef NBC_PARSE_CTX_H
#define NBC_PARSE_CTX_H

#include <setjmp.h>
#include "ast.h"

typedef struct {
    ast_file *file;
    diag *d;
    int line, col;   /* where the lexer stands */
    long off;        /* and its byte offset */
    int nomem;
    int too_deep;    /* reported once */
    int failed;      /* a fatal scanner error was reported */
    jmp_buf fatal;   /* where a fatal scanner error returns to */
} parse_ctx;

typedef struct {
    int first_line, first_column, last_line, last_column;
    long first_off, last_off; /* byte offsets: [first_off, last_off) is the text */
} parse_loc;

/* Like bison's default, carrying the offsets too. */
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                      \
    do {                                                                 \
        if (N) {                                                         \
            (Cur).first_line = YYRHSLOC(Rhs, 1).first_line;              \
            (Cur).first_column = YYRHSLOC(Rhs, 1).first_column;          \
            (Cur).first_off = YYRHSLOC(Rhs, 1).first_off;                \
            (Cur).last_line = YYRHSLOC(Rhs, N).last_line;                \
            (Cur).last_column = YYRHSLOC(Rhs, N).last_column;            \
            (Cur).last_off = YYRHSLOC(Rhs, N).last_off;                  \
        } else {                                                         \
            (Cur).first_line = (Cur).last_line = YYRHSLOC(Rhs, 0).last_line; \
            (Cur).first_column = (Cur).last_column = YYRHSLOC(Rhs, 0).last_column; \
            (Cur).first_off = (Cur).last_off = YYRHSLOC(Rhs, 0).last_off; \
        }                                                                \
    } while (0)

void parse_error(parse_ctx *ctx, parse_loc at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void parse_check_collective(parse_ctx *ctx, const char *name, parse_loc at);

/* flex's fatal errors (out of memory, in practice) end the parse with an error. */
_Noreturn void parse_fatal(parse_ctx *ctx, const char *msg);

#endif
