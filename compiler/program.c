/* The program format's tables: the opcodes' rows (program.h's NBC_OPCODES) and the names of
 * opcodes and slots as dumps and messages print them. */
#include "program.h"

#define NBC_OPCODE_ROW(name, reads, writes, message, reduces, flag) {#name, reads, writes, message, reduces, flag},
const nbc_opinfo nbc_opinfo_table[OP_COUNT_ + 1] = {NBC_OPCODES(NBC_OPCODE_ROW){"?", 0, 0, 0, 0, 0}};

const char *prog_opcode_name(int op)
{
    return prog_opinfo((unsigned)op)->name;
}

const char *prog_slot_name(int slot)
{
    static const char *const names[NBC_MAX_SLOTS] = {"send", "recv", "scratch", "shared", "buf1", "buf2", "buf3", "buf4",
        "buf5", "buf6", "buf7", "buf8", "buf9", "buf10", "buf11", "buf12", "buf13", "buf14", "buf15"};
    return slot >= 0 && slot < NBC_MAX_SLOTS ? names[slot] : "?";
}
