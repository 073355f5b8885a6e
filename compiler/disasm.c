#include "disasm.h"

#include <inttypes.h>
#include <stdio.h>

/* An operand's buffer: "recv", or "recv@1" for rank 1's (SLOT_PEER; the instruction's peer). */
static const char *buffer(const nbc_insn *in, unsigned slot, char *space, size_t size)
{
    if (!(slot & SLOT_PEER)) return prog_slot_name((int)slot);
    snprintf(space, size, "%s@%d", prog_slot_name((int)SLOT_INDEX(slot)), in->peer);
    return space;
}

void prog_disasm(const nbc_program *p, FILE *out)
{
    uint32_t comms = 0;
    for (uint32_t i = 0; i < p->ninsns; i++) comms += prog_opinfo(prog_insns(p)[i].op)->message;
    fprintf(out, "; %u rounds, %u instructions (%u messages), scratch %" PRIu64 " bytes, element %u bytes", p->nrounds,
            p->ninsns, comms, p->scratch, p->esize);
    if (p->flags & PROG_SHARED) fprintf(out, ", shared memory (peers' memory, flags)");
    if (p->shared_bytes) fprintf(out, ", shared scratch %" PRIu64 " bytes", p->shared_bytes);
    /* the runtime starts it only once every rank has published its send and receive buffers */
    fprintf(out, "%s\n", p->flags & PROG_AGREE ? ", agreement" : "");
    fprintf(out, "round    pc  opcode   peer  buffer        offset      length  source        offset  line:col\n");
    for (uint32_t r = 0; r < p->nrounds; r++) {
        for (uint32_t pc = prog_rounds(p)[r]; pc < prog_rounds(p)[r + 1]; pc++) {
            const nbc_insn *in = &prog_insns(p)[pc];
            const nbc_srcloc *at = &prog_locs(p)[pc];
            const nbc_opinfo *info = prog_opinfo(in->op);
            unsigned uses = prog_operands(in->op);
            char peer[16] = "-", name[3][24];
            if (info->flag) /* a flag goes to its peer (SIGNAL) or comes from it (WAIT) */
                snprintf(peer, sizeof peer, "%s %d", in->op == OP_SIGNAL ? "->" : "<-", in->peer);
            else if (info->message || in->peer >= 0)
                snprintf(peer, sizeof peer, "%d", in->peer);
            if (info->flag) { /* no data: no buffer, offset or length */
                fprintf(out, "%5u %5u  %-7s %5s  %-7s %12s %11s  %-7s %12s  %u:%u\n", r, pc, info->name, peer, "", "", "", "", "",
                        at->line, at->col);
                continue;
            }
            fprintf(out, "%5u %5u  %-7s %5s  %-7s %12" PRIu64 " %11" PRIu64, r, pc, info->name, peer,
                    buffer(in, in->a_slot, name[0], sizeof name[0]), in->a_off, in->len);
            if (uses & OPND_B)
                fprintf(out, "  %-7s %12" PRIu64, buffer(in, in->b_slot, name[1], sizeof name[1]), in->b_off);
            else
                fprintf(out, "  %-7s %12s", "", "");
            fprintf(out, "  %u:%u", at->line, at->col);
            if (uses & OPND_C) /* a third operand: COMBINE's right one, where its fused copy read */
                fprintf(out, "  with %s+%" PRIu64, buffer(in, in->c_slot, name[2], sizeof name[2]), in->c_off);
            fprintf(out, "\n");
        }
    }
}
