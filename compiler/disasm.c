#include "disasm.h"

#include <inttypes.h>

const char *prog_opcode_name(int op)
{
    static const char *const names[OP_COUNT_] = {"SEND", "RECV", "COPY", "REDUCE", "COMBINE"};
    return op >= 0 && op < OP_COUNT_ ? names[op] : "?";
}

const char *prog_slot_name(int slot)
{
    static const char *const names[NBC_MAX_SLOTS] = {"send", "recv", "scratch", "buf1", "buf2", "buf3", "buf4",
        "buf5", "buf6", "buf7", "buf8", "buf9", "buf10", "buf11", "buf12", "buf13", "buf14", "buf15"};
    return slot >= 0 && slot < NBC_MAX_SLOTS ? names[slot] : "?";
}

void prog_disasm(const nbc_program *p, FILE *out)
{
    uint32_t comms = 0;
    for (uint32_t i = 0; i < p->ninsns; i++) comms += prog_insns(p)[i].op <= OP_RECV;
    fprintf(out, "; %u rounds, %u instructions (%u messages), scratch %" PRIu64 " bytes, element %u bytes\n",
            p->nrounds, p->ninsns, comms, p->scratch, p->esize);
    fprintf(out, "round    pc  opcode   peer  buffer        offset      length  source        offset  line:col\n");
    for (uint32_t r = 0; r < p->nrounds; r++) {
        for (uint32_t pc = prog_rounds(p)[r]; pc < prog_rounds(p)[r + 1]; pc++) {
            const nbc_insn *in = &prog_insns(p)[pc];
            const nbc_srcloc *at = &prog_locs(p)[pc];
            char peer[16] = "-";
            if (in->op == OP_SEND || in->op == OP_RECV) snprintf(peer, sizeof peer, "%d", in->peer);
            fprintf(out, "%5u %5u  %-7s %5s  %-7s %12" PRIu64 " %11" PRIu64, r, pc, prog_opcode_name(in->op), peer,
                    prog_slot_name(in->a_slot), in->a_off, in->len);
            if (in->op >= OP_COPY)
                fprintf(out, "  %-7s %12" PRIu64, prog_slot_name(in->b_slot), in->b_off);
            else
                fprintf(out, "  %-7s %12s", "", "");
            fprintf(out, "  %u:%u", at->line, at->col);
            if (in->op == OP_COMBINE) /* the right operand, where the fused copy read it */
                fprintf(out, "  with %s+%" PRIu64, prog_slot_name(in->c_slot), in->c_off);
            fprintf(out, "\n");
        }
    }
}
