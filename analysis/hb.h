/* Happens-before for shared-memory programs (program.h's header: PROG_SHARED, SLOT_PEER,
 * SIGNAL and WAIT), with vector clocks, for nbcc verify.
 *
 * Epochs number what a rank does, in program order: instruction pc is 2·pc + 2 (COPY, REDUCE
 * and COMBINE happen at that instant; a SEND or RECV is posted then), the end of round k is
 * 2·rounds[k+1] + 1, so a round ends after its instructions and before the next round's, and
 * a SIGNAL at pc q carries 2·q + 1: everything its rank issued before it, not the end of its
 * own round. Epoch 1 is the rank's start (every rank of a PROG_AGREE program knows every
 * other's), 0 knows nothing. A clock holds, per rank, the latest epoch of it known to have happened.
 *
 * Every cell of a rank's send and receive buffers and shared scratch (what peers can name)
 * keeps its last write and the latest read of each rank since (as FastTrack does; an earlier read of the same rank happens before the later
 * one). An access by rank a with clock C is ordered after a recorded access (b, t) of another
 * rank when C[b] >= t. A message's access lasts until its round ends, so it is checked against
 * what is recorded with its rank's clock when posted, and recorded with its round's end. */
#ifndef NBC_HB_H
#define NBC_HB_H

#include <stdint.h>

typedef struct {
    uint32_t rank, pc, epoch;
} hb_access;

typedef struct {
    hb_access w;          /* the last write (valid when has_w) */
    hb_access *r;         /* reads since, the latest of each rank */
    uint32_t has_w, nr, cap;
} hb_cell;

static inline uint32_t hb_insn(uint32_t pc) { return 2 * pc + 2; }
static inline uint32_t hb_signal(uint32_t pc) { return 2 * pc + 1; }
static inline uint32_t hb_round_end(const uint32_t *rounds, uint32_t k) { return 2 * rounds[k + 1] + 1; }

enum { HB_WRITE = 1, HB_READ = 2 };

/* An access of rank `who` (pc, epoch to record) with clock clk to a cell: HB_WRITE or HB_READ
 * (what the other did) with the access it is not ordered with in *other (the cell unchanged),
 * 0 when ordered (and recorded), -1 when out of memory. */
int hb_access_cell(hb_cell *c, uint32_t who, uint32_t pc, uint32_t epoch, int writes, const uint32_t *clk, hb_access *other);
/* HB_WRITE or HB_READ with an access of a rank other than owner that clk (the owner's at its
 * end) does not know of in *bad, else 0. */
int hb_unknown(const hb_cell *c, uint32_t owner, const uint32_t *clk, hb_access *bad);
/* into := max(into, snap), and at least `own` for rank `sender` (p entries). */
void hb_join(uint32_t *into, const uint32_t *snap, uint32_t p, uint32_t sender, uint32_t own);
void hb_cells_free(hb_cell *c, uint32_t n);

#endif
