/* Between the process's segment and heap (shm_heap.c) and the communicators' blocks, channels
 * and agreements cut from it (shm.c). Private to those two files: the rest of the library
 * reaches shared memory through shm.h. */
#ifndef NBC_SHM_HEAP_H
#define NBC_SHM_HEAP_H

#include <stdint.h>

#define SEG_MAGIC 0x6e62632d73686d31ull /* "nbc-shm1" */

/* The segment's first bytes: a peer that maps it (shm.c) checks that it mapped the right
 * process's. */
typedef struct {
    uint64_t magic, nonce;
    int64_t pid;
} seg_header;

/* Makes the segment on first use: 1 when there is one, 0 when it cannot be made. */
int shm_segment(void);
/* A block of the heap: its offset in the segment, 0 when nothing fits. */
uint64_t shm_heap_alloc(uint64_t size);
/* 0 when off starts no block in use. */
int shm_heap_free(uint64_t off);
/* Where len bytes at p are in this process's segment, or -1 when they are not. */
int64_t shm_segment_offset(const void *p, uint64_t len);
/* Frees the retired blocks of freed communicators that every rank has let go of (shm.c). */
void shm_sweep_retired(void);

#endif
