/* The syntax tree of a schedule file. Every node lives in the file's arena and is freed with
 * it, so a parse that stops half-way cannot leak. Every node keeps its source location. */
#ifndef NBC_AST_H
#define NBC_AST_H

#include <stdint.h>
#include "diag.h"

typedef enum {
    /* expressions */
    N_NUM,      /* num */
    N_VAR,      /* name */
    N_UNARY,    /* op a */
    N_BINARY,   /* a op b; && and || short-circuit */
    N_COND,     /* a ? b : c */
    N_FUNC,     /* name(args...): a builtin such as min, log2 or block */
    N_INDEX,    /* a[b] (b an int or a range) or a[b : c] */
    N_PEER,     /* name@a: buffer `name` (sendbuf or recvbuf) of rank a */
    /* statements */
    N_LET,      /* let name = a */
    N_ASSIGN,   /* name = a */
    N_SCRATCH,  /* scratch name[a] */
    N_SHARED,   /* shared name[a]: in the shared scratch, which other ranks can name (name@r) */
    N_IF,       /* if a { b } else { c } */
    N_FOR_IN,   /* for name in a .. b { c } */
    N_FOR_WHILE,/* for name = a while b next c { d } */
    N_ROUND,    /* round { a } */
    N_SEND,     /* send a to b */
    N_RECV,     /* recv a from b */
    N_COPY,     /* copy a to b */
    N_REDUCE,   /* reduce a += b (op '+') or reduce a =+ b (op '=') */
    N_SIGNAL,   /* signal a: tell rank a (on this node) */
    N_WAIT,     /* wait a: the round ends after rank a's matching signal */
    N_CALL,     /* call name(args...) where each arg is an N_ARG */
    N_ARG,      /* name = a, in a call */
} node_kind;

typedef struct node node;
struct node {
    node_kind kind;
    loc at;
    int op;            /* operator token of N_UNARY/N_BINARY, direction of N_REDUCE */
    int depth;         /* nesting depth, bounded so evaluation cannot overflow the stack */
    int64_t num;
    const char *name;
    const char *text;  /* the source text of a `requires` condition */
    loc text_at;       /* and where it starts */
    node *a, *b, *c, *d;
    node *next;        /* next statement, argument or list item */
    node *last;        /* on the head of a list being built: its last item */
};

typedef struct sched_def sched_def;
struct sched_def {
    const char *name;
    const char *collective; /* "allreduce", ...; NULL for a building block */
    int ordered;            /* reduces in rank order 0..p-1, alike on every rank */
    loc at;
    node *params;           /* N_LET list: parameters with their defaults */
    node *requires;         /* expression list: preconditions */
    node *body;             /* statement list */
    const source *src;
    sched_def *next;
};

/* A parsed file: its source (copied), its schedules, and the arena holding all of it. */
typedef struct ast_file {
    source src;
    sched_def *schedules;
    struct arena_block *arena;
} ast_file;

/* Parses `text` (len bytes, may hold NULs) named `name` in messages. Returns the file, or NULL
 * with the reasons in d (d->errors > 0). Never crashes, never leaks, whatever the input. */
ast_file *dsl_parse(const char *name, const char *text, size_t len, diag *d);
void ast_free(ast_file *f);

/* Used by the parser. */
void *ast_alloc(ast_file *f, size_t size);
const char *ast_strdup(ast_file *f, const char *s, size_t len);
node *ast_node(ast_file *f, node_kind kind, loc at, node *a, node *b, node *c);
node *ast_append(node *list, node *item);  /* list may be NULL; returns the head */

/* Operators are their character ('+', '<', '!'...) or one of these. */
enum { OPR_EQ = 256, OPR_NE, OPR_LE, OPR_GE, OPR_SHL, OPR_SHR, OPR_AND, OPR_OR };
const char *ast_op_name(int op);

#define AST_MAX_DEPTH 200
/* The parser's stack: parentheses and operators nested deeper are an error. */
#define DSL_MAX_NESTING 10000
/* The largest source text dsl_parse takes (the size limit of files, see lib_read_file). */
#define DSL_MAX_SOURCE (16 << 20)

#endif
