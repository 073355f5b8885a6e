/* MPI_Alloc_mem and MPI_Free_mem: memory from nbc_alloc_mem, so that a program that allocates
 * its buffers with MPI_Alloc_mem gets nbc's shared-memory allreduce (runtime/shm.c) without a
 * change. NBC_MPI_ALLOC_MEM=0 leaves both calls to MPICH.
 *
 * MPI_Free_mem must tell nbc's blocks from MPICH's: nbc_free_mem hands any pointer outside its
 * segment to free(), which is wrong for MPICH's memory (and nbc_alloc_mem's own fallback is
 * malloc, outside the segment too). So the blocks handed out here are kept in a table, and a
 * pointer that is not in it goes to PMPI_Free_mem. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nbcmpi.h"

typedef struct {
    uintptr_t base, size;
} block;

static block *blocks;
static size_t nblocks, cap;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int alloc_mem_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("NBC_MPI_ALLOC_MEM");
        on = !v || atoi(v) > 0;
    }
    return on;
}

static int remember(void *p, MPI_Aint size)
{
    int ok = 1;
    pthread_mutex_lock(&lock);
    if (nblocks == cap) {
        size_t n = cap ? 2 * cap : 16;
        block *b = realloc(blocks, n * sizeof *b);
        if (b) blocks = b, cap = n;
        else ok = 0;
    }
    if (ok) blocks[nblocks++] = (block){(uintptr_t)p, (uintptr_t)size};
    pthread_mutex_unlock(&lock);
    return ok;
}

/* 1: p starts a block handed out here (now forgotten); -1: p lies inside one; 0: neither.
 * Searched from the newest: buffers are often freed in the reverse order of allocation. */
static int forget(void *p, MPI_Aint *size)
{
    uintptr_t at = (uintptr_t)p;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = nblocks; i-- > 0;) {
        if (blocks[i].base == at) {
            *size = (MPI_Aint)blocks[i].size;
            blocks[i] = blocks[--nblocks];
            found = 1;
            break;
        }
        if (at > blocks[i].base && at - blocks[i].base < blocks[i].size) {
            found = -1;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    if (!alloc_mem_on()) {
        nm_passed(K_ALLOC_MEM, R_ALLOC_MEM_OFF);
        return PMPI_Alloc_mem(size, info, baseptr);
    }
    /* no communicator: MPI reports through MPI_COMM_WORLD's handler */
    if (size < 0 || !baseptr) return nm_error(MPI_COMM_WORLD, MPI_ERR_ARG);
    void *p = NULL;
    if (nbc_alloc_mem(size, &p) != MPI_SUCCESS) { /* nbc cannot start: MPICH's memory is as good */
        nm_passed(K_ALLOC_MEM, R_NBC_REFUSED);
        return PMPI_Alloc_mem(size, info, baseptr);
    }
    if (!remember(p, size ? size : 1)) {
        nbc_free_mem(p);
        return nm_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    }
    memcpy(baseptr, &p, sizeof p);
    nm_ran(K_ALLOC_MEM);
    return MPI_SUCCESS;
}

int MPI_Free_mem(void *base)
{
    MPI_Aint size = 0;
    int mine = base ? forget(base, &size) : 0;
    if (mine < 0) return nm_error(MPI_COMM_WORLD, MPI_ERR_ARG); /* not the start of its block */
    if (!mine) return PMPI_Free_mem(base);
    int rc = nbc_free_mem(base);
    if (rc != MPI_SUCCESS) remember(base, size); /* refused (a running collective uses it): still ours */
    return nm_error(MPI_COMM_WORLD, rc);
}
