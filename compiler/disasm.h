/* The disassembler: a program as a table, one instruction a line, for review (in the spirit
 * of SQLite's EXPLAIN). */
#ifndef NBC_DISASM_H
#define NBC_DISASM_H

#include <stdio.h>
#include "program.h"

void prog_disasm(const nbc_program *p, FILE *out);

#endif
