/* The process's segment and its heap: what nbc_alloc_mem and nbc_free_mem hand out, and where
 * each attached communicator's block is cut from (shm.c). Apart from shm.c because it is
 * per process, not per communicator or call: a memfd, mapped once, that outlives
 * nbc_finalize, with a first-fit list of spans; nothing here knows of channels or peers, except
 * that a full heap first frees the blocks of freed communicators that every peer let go of
 * (shm_sweep_retired, shm.c). shm_init, which reads the process's settings (NBC_SHM,
 * NBC_SHM_KERNEL, NBC_SHM_BYTES), is here with the segment whose size it sets. */
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "env.h"
#include "shm_heap.h"
#include "state.h"

#define HEAP_START 4096
#define ALIGN 64
#define PUNCH_BYTES (1u << 20)      /* freed spans this large give their pages back */

struct shm_span {
    uint64_t off, size;
    int used;
    shm_span *next;
};

int shm_segment(void)
{
    shm_process *s = &nbc_rt.shm;
    if (s->base) return 1;
    if (s->failed) return 0;
    shm_span *all = malloc(sizeof *all);
    int fd = memfd_create("nbc-shm", MFD_CLOEXEC);
    void *b = MAP_FAILED;
    if (all && fd >= 0 && ftruncate(fd, (off_t)s->bytes) == 0)
        b = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint64_t nonce = 0;
    if (b == MAP_FAILED || getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) {
        if (b != MAP_FAILED) munmap(b, s->bytes);
        if (fd >= 0) close(fd);
        free(all);
        s->failed = 1;
        return 0;
    }
    s->fd = fd;
    s->base = b;
    s->nonce = nonce;
    *(seg_header *)b = (seg_header){SEG_MAGIC, nonce, getpid()};
    *all = (shm_span){HEAP_START, s->bytes - HEAP_START, 0, NULL};
    s->spans = all;
    return 1;
}

/* First fit; 0 when nothing fits. */
uint64_t shm_heap_alloc(uint64_t size)
{
    size = (size + ALIGN - 1) / ALIGN * ALIGN;
    for (shm_span *at = nbc_rt.shm.spans; at; at = at->next) {
        if (at->used || at->size < size) continue;
        if (at->size > size) {
            shm_span *rest = malloc(sizeof *rest);
            if (!rest) return 0;
            *rest = (shm_span){at->off + size, at->size - size, 0, at->next};
            at->next = rest;
            at->size = size;
        }
        at->used = 1;
        return at->off;
    }
    return 0;
}

/* Merges with free neighbours; 0 when off starts no block in use. */
int shm_heap_free(uint64_t off)
{
    shm_span *prev = NULL, *at = nbc_rt.shm.spans;
    while (at && at->off != off) prev = at, at = at->next;
    if (!at || !at->used) return 0;
    if (at->size >= PUNCH_BYTES) /* its pages go back to the system (peers then read zeros) */
        fallocate(nbc_rt.shm.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)at->off, (off_t)at->size);
    at->used = 0;
    shm_span *next = at->next;
    if (next && !next->used) {
        at->size += next->size;
        at->next = next->next;
        free(next);
    }
    if (prev && !prev->used) {
        prev->size += at->size;
        prev->next = at->next;
        free(at);
    }
    return 1;
}

/* Where len bytes at p are in this process's segment, or -1 when they are not. */
int64_t shm_segment_offset(const void *p, uint64_t len)
{
    const char *base = nbc_rt.shm.base, *at = p;
    if (!base || at < base + HEAP_START || at > base + nbc_rt.shm.bytes || len > (uint64_t)(base + nbc_rt.shm.bytes - at)) return -1;
    return at - base;
}

int shm_alloc(size_t size, void *baseptr)
{
    if (!baseptr) return nbc_fail(MPI_ERR_ARG, "nbc_alloc_mem: baseptr is NULL");
    void *p = NULL;
    if (size == 0) size = 1;
    if (nbc_rt.shm.enabled && shm_segment()) {
        uint64_t off = shm_heap_alloc(size);
        if (off) p = nbc_rt.shm.base + off;
    }
    if (!p && nbc_rt.shm.retired) { /* blocks of freed communicators may have been let go of since */
        shm_sweep_retired();
        uint64_t off = shm_heap_alloc(size);
        if (off) p = nbc_rt.shm.base + off;
    }
    if (!p) p = malloc(size); /* memory all the same, only not shared */
    if (!p) return nbc_fail(MPI_ERR_NO_MEM, "nbc_alloc_mem: out of memory (%zu bytes)", size);
    memcpy(baseptr, &p, sizeof p);
    return MPI_SUCCESS;
}

/* The block's size: in the segment, its span's (0 when base starts none); else malloc's. */
static size_t block_size(void *base, int64_t off)
{
    if (off < 0) return malloc_usable_size(base);
    for (shm_span *at = nbc_rt.shm.spans; at; at = at->next)
        if (at->off == (uint64_t)off) return at->used ? at->size : 0;
    return 0;
}

/* A block an active request still uses is refused, and stays allocated: its peers may still
 * read or write it (docs/shared-memory.md); so is one bound to a persistent request. */
int shm_free(void *base)
{
    if (!base) return MPI_SUCCESS;
    int64_t off = shm_segment_offset(base, 0);
    size_t size = block_size(base, off);
    if (off >= 0 && !size) return nbc_fail(MPI_ERR_ARG, "nbc_free_mem: %p is not the start of a block from nbc_alloc_mem", base);
    struct nbc_req *user = req_using(base, size);
    if (user) {
        char what[160];
        req_describe(user, what, sizeof what);
        return nbc_fail(MPI_ERR_BUFFER, "nbc_free_mem: the block at %p is a buffer of %s %s: %s before freeing the block",
                        base, user->state == REQ_ACTIVE ? "an active" : "a", what,
                        user->state == REQ_ACTIVE ? "complete it (nbc_wait or nbc_test)" : "free the request (nbc_request_free)");
    }
    if (off < 0) free(base);
    else shm_heap_free((uint64_t)off);
    return MPI_SUCCESS;
}

int shm_init(void)
{
    shm_process *s = &nbc_rt.shm;
    char err[300];
    int on, kernel;
    uint64_t bytes, phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    /* Bounded: tools that shadow every mapped page (valgrind under MPICH) commit all of it */
    uint64_t fit = phys / 4 > SHM_DEFAULT_BYTES ? SHM_DEFAULT_BYTES : phys / 4;
    if (env_bool("NBC_SHM", 1, &on, err, sizeof err) || env_bool("NBC_SHM_KERNEL", 1, &kernel, err, sizeof err) ||
        env_uint("NBC_SHM_BYTES", fit > (64u << 20) ? fit : 64u << 20, 1ull << 46, &bytes, err, sizeof err))
        return nbc_fail(MPI_ERR_ARG, "%s", err);
    if (bytes < (1u << 20)) return nbc_fail(MPI_ERR_ARG, "NBC_SHM_BYTES: %llu is less than 1 MiB", (unsigned long long)bytes);
    /* which ranks share a node is learnt per communicator, from their node keys (shm.c) */
    s->enabled = on;
    s->kernel = kernel;
    if (!s->base) s->bytes = bytes; /* a segment made before a re-initialization keeps its size */
    return MPI_SUCCESS;
}
