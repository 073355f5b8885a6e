#include "ast.h"

#include <stdlib.h>
#include <string.h>

/* A bump allocator: nodes are freed all at once with their file. */
struct arena_block {
    struct arena_block *prev;
    size_t used, cap;
    _Alignas(16) char data[];
};

void *ast_alloc(ast_file *f, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    struct arena_block *b = f->arena;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > 16384 ? size : 16384;
        struct arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->prev = b;
        nb->used = 0;
        nb->cap = cap;
        f->arena = b = nb;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

const char *ast_strdup(ast_file *f, const char *s, size_t len)
{
    char *p = ast_alloc(f, len + 1);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

node *ast_node(ast_file *f, node_kind kind, loc at, node *a, node *b, node *c)
{
    node *n = ast_alloc(f, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->at = at;
    n->a = a;
    n->b = b;
    n->c = c;
    int depth = 0;
    node *kids[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (kids[i] && kids[i]->depth > depth) depth = kids[i]->depth;
    n->depth = depth + 1;
    return n;
}

node *ast_append(node *list, node *item)
{
    if (!item) return list;
    if (!list) {
        item->last = item;
        return item;
    }
    list->last->next = item;
    list->last = item;
    if (item->depth > list->depth) list->depth = item->depth;
    return list;
}

void ast_free(ast_file *f)
{
    if (!f) return;
    struct arena_block *b = f->arena;
    char *text = (char *)f->src.text;
    while (b) {
        struct arena_block *prev = b->prev;
        free(b);
        b = prev;
    }
    free(text);
    free(f);
}

const char *ast_op_name(int op)
{
    static const char *const multi[] = {"==", "!=", "<=", ">=", "<<", ">>", "&&", "||"};
    static char single[128][2];
    if (op >= OPR_EQ && op <= OPR_OR) return multi[op - OPR_EQ];
    if (op > 0 && op < 128) {
        single[op][0] = (char)op;
        return single[op];
    }
    return "?";
}
