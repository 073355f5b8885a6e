#include "disasm.h"

#include <inttypes.h>

void prog_disasm(const nbc_program *p, FILE *out)
{
    uint32_t comms = 0;
    for (uint32_t i = 0; i < p->ninsns; i++) comms += prog_opinfo(prog_insns(p)[i].op)->message;
    fprintf(out, "; %u rounds, %u instructions (%u messages), scratch %" PRIu64 " bytes, element %u bytes\n",
            p->nrounds, p->ninsns, comms, p->scratch, p->esize);
    fprintf(out, "round    pc  opcode   peer  buffer        offset      length  source        offset  line:col\n");
    for (uint32_t r = 0; r < p->nrounds; r++) {
        for (uint32_t pc = prog_rounds(p)[r]; pc < prog_rounds(p)[r + 1]; pc++) {
            const nbc_insn *in = &prog_insns(p)[pc];
            const nbc_srcloc *at = &prog_locs(p)[pc];
            unsigned uses = prog_operands(in->op);
            char peer[16] = "-";
            if (prog_opinfo(in->op)->message) snprintf(peer, sizeof peer, "%d", in->peer);
            fprintf(out, "%5u %5u  %-7s %5s  %-7s %12" PRIu64 " %11" PRIu64, r, pc, prog_opcode_name(in->op), peer,
                    prog_slot_name(in->a_slot), in->a_off, in->len);
            if (uses & OPND_B)
                fprintf(out, "  %-7s %12" PRIu64, prog_slot_name(in->b_slot), in->b_off);
            else
                fprintf(out, "  %-7s %12s", "", "");
            fprintf(out, "  %u:%u", at->line, at->col);
            if (uses & OPND_C) /* a third operand: COMBINE's right one, where its fused copy read */
                fprintf(out, "  with %s+%" PRIu64, prog_slot_name(in->c_slot), in->c_off);
            fprintf(out, "\n");
        }
    }
}
