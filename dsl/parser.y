/* The schedule language's grammar. Pure and reentrant; every node carries its location. */
%define api.pure full
%define api.prefix {dsl_yy}
%define parse.error custom
%define parse.lac full
%define api.location.type {parse_loc}
%locations
%lex-param {void *scanner}
%parse-param {void *scanner} {parse_ctx *ctx}

%code requires {
#include "ast.h"
#include "parse_ctx.h"
}

%code provides {
int dsl_yylex(DSL_YYSTYPE *lval, parse_loc *lloc, void *scanner);
}

%code {
#include <stdio.h>
#include <string.h>

#define YYMAXDEPTH DSL_MAX_NESTING

static loc L(parse_loc p) { return (loc){p.first_line, p.first_column}; }

static void dsl_yyerror(parse_loc *at, void *scanner, parse_ctx *ctx, const char *msg)
{
    (void)scanner;
    if (strcmp(msg, "memory exhausted") == 0) { /* bison's stack reached YYMAXDEPTH */
        if (ctx->too_deep) return;
        ctx->too_deep = 1;
        parse_error(ctx, *at, "nesting too deep: more than %d levels of parentheses, operators or blocks", DSL_MAX_NESTING);
        return;
    }
    parse_error(ctx, *at, "%s", msg);
}

/* Builds a node; on allocation failure or excessive nesting, records the problem. */
static node *mk(parse_ctx *ctx, node_kind k, parse_loc at, node *a, node *b, node *c)
{
    node *n = ast_node(ctx->file, k, L(at), a, b, c);
    if (!n) {
        ctx->nomem = 1;
        return NULL;
    }
    if (n->depth > AST_MAX_DEPTH && !ctx->too_deep) {
        ctx->too_deep = 1;
        parse_error(ctx, at, "nested too deeply (more than %d levels)", AST_MAX_DEPTH);
    }
    return n;
}
#define MK(k, at, a, b, c) ({ node *n_ = mk(ctx, k, at, a, b, c); if (!n_) YYNOMEM; n_; })
}

%union {
    long long num;
    const char *str;
    node *n;
    sched_def *s;
}

%token KW_SCHEDULE "'schedule'" KW_IMPLEMENTS "'implements'" KW_REQUIRES "'requires'"
%token KW_ORDERED "'ordered'" KW_PARAM "'param'" KW_LET "'let'" KW_SCRATCH "'scratch'" KW_SHARED "'shared'" KW_FOR "'for'" KW_IN "'in'"
%token KW_WHILE "'while'" KW_NEXT "'next'" KW_IF "'if'" KW_ELSE "'else'" KW_ROUND "'round'"
%token KW_SEND "'send'" KW_TO "'to'" KW_RECV "'recv'" KW_FROM "'from'" KW_COPY "'copy'"
%token KW_REDUCE "'reduce'" KW_CALL "'call'" KW_SIGNAL "'signal'" KW_WAIT "'wait'"
%token T_EQ "'=='" T_NE "'!='" T_LE "'<='" T_GE "'>='" T_SHL "'<<'" T_SHR "'>>'"
%token T_AND "'&&'" T_OR "'||'" T_PLUSEQ "'+='" T_EQPLUS "'=+'" T_DOTDOT "'..'"
%token T_NOMEM "out of memory"
%token <num> T_NUM "number"
%token <str> T_ID "identifier"

%type <n> stmts stmt block if_stmt args arglist arg expr exprs exprlist params requires primary
%type <s> schedule
%type <str> implements
%type <num> ordered

%right '?' ':'
%left T_OR
%left T_AND
%left '|'
%left '^'
%left '&'
%left T_EQ T_NE
%left '<' '>' T_LE T_GE
%left T_SHL T_SHR
%left '+' '-'
%left '*' '/' '%'
%precedence '!' '~' UMINUS
%precedence '['

%%

file
    : %empty
    | file schedule          { if ($2) { sched_def **p = &ctx->file->schedules;
                                         while (*p) p = &(*p)->next;
                                         *p = $2; } }
    ;

schedule
    : KW_SCHEDULE T_ID implements ordered params requires '{' stmts '}' {
          $$ = ast_alloc(ctx->file, sizeof *$$);
          if (!$$) YYNOMEM;
          $$->name = $2; $$->collective = $3; $$->at = L(@2); $$->ordered = (int)$4;
          $$->params = $5; $$->requires = $6; $$->body = $8;
          $$->src = &ctx->file->src;
      }
    ;

implements
    : %empty                 { $$ = NULL; }
    | KW_IMPLEMENTS T_ID     { $$ = $2; parse_check_collective(ctx, $2, @2); }
    | KW_IMPLEMENTS KW_REDUCE { $$ = "reduce"; }  /* a keyword, and a collective's name */
    ;

ordered
    : %empty                 { $$ = 0; }
    | KW_ORDERED             { $$ = 1; }
    ;

params
    : %empty                 { $$ = NULL; }
    | params KW_PARAM T_ID '=' expr
                             { node *n = MK(N_LET, @3, $5, NULL, NULL); n->name = $3;
                               $$ = ast_append($1, n); }
    ;

requires
    : %empty                 { $$ = NULL; }
    | requires KW_REQUIRES expr { $3->text_at = L(@3);
                                  $3->text = ast_strdup(ctx->file, ctx->file->src.text + @3.first_off,
                                                       (size_t)(@3.last_off - @3.first_off));
                                  if (!$3->text) YYNOMEM;
                                  $$ = ast_append($1, $3); }
    ;

stmts
    : %empty                 { $$ = NULL; }
    | stmts stmt             { $$ = ast_append($1, $2); }
    ;

block
    : '{' stmts '}'          { $$ = $2; }
    ;

stmt
    : KW_LET T_ID '=' expr ';'       { $$ = MK(N_LET, @2, $4, NULL, NULL); $$->name = $2; }
    | T_ID '=' expr ';'              { $$ = MK(N_ASSIGN, @1, $3, NULL, NULL); $$->name = $1; }
    | KW_SCRATCH T_ID '[' expr ']' ';' { $$ = MK(N_SCRATCH, @2, $4, NULL, NULL); $$->name = $2; }
    | KW_SHARED T_ID '[' expr ']' ';'  { $$ = MK(N_SHARED, @2, $4, NULL, NULL); $$->name = $2; }
    | if_stmt
    | KW_FOR T_ID KW_IN expr T_DOTDOT expr block
                                     { $$ = MK(N_FOR_IN, @1, $4, $6, $7); $$->name = $2; }
    | KW_FOR T_ID '=' expr KW_WHILE expr KW_NEXT expr block
                                     { $$ = MK(N_FOR_WHILE, @1, $4, $6, $8); $$->name = $2;
                                       $$->d = $9;
                                       if ($9 && $9->depth + 1 > $$->depth) $$->depth = $9->depth + 1; }
    | KW_ROUND block                 { $$ = MK(N_ROUND, @1, $2, NULL, NULL); }
    | KW_SEND expr KW_TO expr ';'    { $$ = MK(N_SEND, @1, $2, $4, NULL); }
    | KW_RECV expr KW_FROM expr ';'  { $$ = MK(N_RECV, @1, $2, $4, NULL); }
    | KW_COPY expr KW_TO expr ';'    { $$ = MK(N_COPY, @1, $2, $4, NULL); }
    | KW_REDUCE expr T_PLUSEQ expr ';' { $$ = MK(N_REDUCE, @1, $2, $4, NULL); $$->op = '+'; }
    | KW_REDUCE expr T_EQPLUS expr ';' { $$ = MK(N_REDUCE, @1, $2, $4, NULL); $$->op = '='; }
    | KW_SIGNAL expr ';'             { $$ = MK(N_SIGNAL, @1, $2, NULL, NULL); }
    | KW_WAIT expr ';'               { $$ = MK(N_WAIT, @1, $2, NULL, NULL); }
    | KW_CALL T_ID '(' args ')' ';'  { $$ = MK(N_CALL, @2, $4, NULL, NULL); $$->name = $2; }
    | ';'                            { $$ = NULL; }
    | error ';'                      { $$ = NULL; if (ctx->d->errors >= 20) YYABORT; }
    | error '}'                      { $$ = NULL; if (ctx->d->errors >= 20) YYABORT; }
    ;

if_stmt
    : KW_IF expr block               { $$ = MK(N_IF, @1, $2, $3, NULL); }
    | KW_IF expr block KW_ELSE block { $$ = MK(N_IF, @1, $2, $3, $5); }
    | KW_IF expr block KW_ELSE if_stmt { $$ = MK(N_IF, @1, $2, $3, $5); }
    ;

args
    : %empty                 { $$ = NULL; }
    | arglist
    ;

arglist
    : arg                    { $$ = ast_append(NULL, $1); }
    | arglist ',' arg        { $$ = ast_append($1, $3); }
    ;

arg
    : T_ID '=' expr          { $$ = MK(N_ARG, @1, $3, NULL, NULL); $$->name = $1; }
    ;

exprs
    : %empty                 { $$ = NULL; }
    | exprlist
    ;

exprlist
    : expr                   { $$ = ast_append(NULL, $1); }
    | exprlist ',' expr      { $$ = ast_append($1, $3); }
    ;

expr
    : T_NUM                  { $$ = MK(N_NUM, @1, NULL, NULL, NULL); $$->num = $1; }
    | T_ID                   { $$ = MK(N_VAR, @1, NULL, NULL, NULL); $$->name = $1; }
    | '(' expr ')'           { $$ = $2; }
    | T_ID '(' exprs ')'     { $$ = MK(N_FUNC, @1, $3, NULL, NULL); $$->name = $1; }
    | T_ID '@' primary       { $$ = MK(N_PEER, @1, $3, NULL, NULL); $$->name = $1; }
    | expr '[' expr ']'      { $$ = MK(N_INDEX, @2, $1, $3, NULL); }
    | expr '[' expr ':' expr ']' { $$ = MK(N_INDEX, @2, $1, $3, $5); }
    | '-' expr %prec UMINUS  { $$ = MK(N_UNARY, @1, $2, NULL, NULL); $$->op = '-'; }
    | '!' expr               { $$ = MK(N_UNARY, @1, $2, NULL, NULL); $$->op = '!'; }
    | '~' expr               { $$ = MK(N_UNARY, @1, $2, NULL, NULL); $$->op = '~'; }
    | expr '?' expr ':' expr { $$ = MK(N_COND, @2, $1, $3, $5); }
    | expr '+' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '+'; }
    | expr '-' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '-'; }
    | expr '*' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '*'; }
    | expr '/' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '/'; }
    | expr '%' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '%'; }
    | expr '&' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '&'; }
    | expr '|' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '|'; }
    | expr '^' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '^'; }
    | expr '<' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '<'; }
    | expr '>' expr          { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = '>'; }
    | expr T_LE expr         { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_LE; }
    | expr T_GE expr         { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_GE; }
    | expr T_EQ expr         { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_EQ; }
    | expr T_NE expr         { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_NE; }
    | expr T_SHL expr        { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_SHL; }
    | expr T_SHR expr        { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_SHR; }
    | expr T_AND expr        { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_AND; }
    | expr T_OR expr         { $$ = MK(N_BINARY, @2, $1, $3, NULL); $$->op = OPR_OR; }
    ;

/* what `@` takes: sendbuf@r[mine] is (sendbuf@r)[mine], sendbuf@(p - 1) needs parentheses */
primary
    : T_NUM                  { $$ = MK(N_NUM, @1, NULL, NULL, NULL); $$->num = $1; }
    | T_ID                   { $$ = MK(N_VAR, @1, NULL, NULL, NULL); $$->name = $1; }
    | '(' expr ')'           { $$ = $2; }
    ;

%%

/* "unexpected X, expecting A or B"; where more would fit, the list is left out, except for a
 * missing ';', the commonest slip. */
static int yyreport_syntax_error(const yypcontext_t *pc, void *scanner, parse_ctx *ctx)
{
    (void)scanner;
    enum { MAX = 64 };
    yysymbol_kind_t expected[MAX];
    int n = yypcontext_expected_tokens(pc, expected, MAX);
    char msg[512];
    int len = snprintf(msg, sizeof msg, "syntax error, unexpected %s", yysymbol_name(yypcontext_token(pc)));
    if (n > 0 && n <= 4) {
        for (int i = 0; i < n; i++)
            len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s", i ? " or " : ", expecting ",
                            yysymbol_name(expected[i]));
    } else { /* mid-statement (where '}' cannot come), name a missing ';' */
        int semi = 0, brace = 0;
        for (int i = 0; i < n; i++) {
            semi |= strcmp(yysymbol_name(expected[i]), "';'") == 0;
            brace |= strcmp(yysymbol_name(expected[i]), "'}'") == 0;
        }
        if (semi && !brace) snprintf(msg + len, sizeof msg - (size_t)len, ", expecting ';'");
    }
    parse_error(ctx, *yypcontext_location(pc), "%s", msg);
    return 0;
}
