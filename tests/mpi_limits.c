/* Lifetimes and bounded resources: the shared segment's default size, nbc_free_mem of a block a
 * running collective uses, and any-order identities over many inits and frees (they stay
 * within the tag space, and a live request never shares a tag with another).
 * Reads the runtime's state (nbc_rt, a request's identity), so it links the library's internals.
 *
 *     mpiexec -n P ./mpi_limits            (P >= 1; NBC_TAG_UB=15 shrinks the tag space)
 *     mpiexec -n 1 valgrind ./mpi_limits --small   (what tests/run.sh runs under valgrind)
 *
 * Prints ok/FAIL lines from rank 0. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbc.h"
#include "state.h"

enum { MAX_CHECKS = 16 };
static const char *names[MAX_CHECKS];
static int failed[MAX_CHECKS], nchecks;
static char why[MAX_CHECKS][300];
static int rank, size;

static void check(int ok, const char *name, const char *fmt, ...)
{
    names[nchecks] = name;
    failed[nchecks] = !ok;
    if (!ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why[nchecks], sizeof why[nchecks], fmt, ap);
        va_end(ap);
    }
    nchecks++;
}

static int64_t input(int r, int base, long i) { return r * 1000 + base + i % 977; }

static long wrong_sums(const int64_t *out, long count, int base)
{
    long bad = 0;
    for (long i = 0; i < count; i++) {
        int64_t want = 0;
        for (int r = 0; r < size; r++) want += input(r, base, i);
        bad += out[i] != want;
    }
    return bad;
}

static void fill(int64_t *in, long count, int base)
{
    for (long i = 0; i < count; i++) in[i] = input(rank, base, i);
}

/* Without NBC_SHM_BYTES the segment is bounded (valgrind under MPICH commits every page of it),
 * shared memory still takes two 256 MiB blocks, and a block beyond it is private memory. */
static void segment_default(void)
{
    if (getenv("NBC_SHM_BYTES")) return;
    void *a = NULL, *b = NULL, *huge = NULL;
    int rc = nbc_alloc_mem(256 << 20, &a);
    if (rc == MPI_SUCCESS) rc = nbc_alloc_mem(256 << 20, &b);
    if (rc == MPI_SUCCESS) rc = nbc_alloc_mem((MPI_Aint)nbc_rt.shm.bytes + 1, &huge);
    const char *base = nbc_rt.shm.base;
    uint64_t bytes = nbc_rt.shm.bytes;
    int in_segment = base && (char *)a >= base && (char *)b + (256 << 20) <= base + bytes;
    int huge_private = huge && !(base && (char *)huge >= base && (char *)huge < base + bytes);
    if (huge) memset(huge, 1, 4096);
    int rc2 = nbc_free_mem(a) | nbc_free_mem(b) | nbc_free_mem(huge);
    check(rc == MPI_SUCCESS && rc2 == MPI_SUCCESS && bytes <= SHM_DEFAULT_BYTES && (in_segment || !nbc_rt.shm.enabled) &&
              huge_private,
          "the segment's default size is bounded (at most 1 GiB), holds two 256 MiB blocks, and a larger block is private",
          "rc %d %d, segment of %llu bytes, blocks in it %d, the larger one private %d: %s", rc, rc2,
          (unsigned long long)bytes, in_segment, huge_private, nbc_error_message());
}

/* nbc_free_mem of a block a running allreduce reads and writes is refused, naming the request,
 * and the block stays: the peers compute from it. Rank 1 joins only after rank 0 tried. */
static void free_mem_in_use(void)
{
    if (size < 2) return;
    long n = (1 << 20) / 8; /* 1 MiB: allreduce_shm, the peers' buffers read where they are */
    int64_t *in, *out;
    nbc_alloc_mem(n * 8, &in);
    nbc_alloc_mem(n * 8, &out);
    fill(in, n, 5);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    nbc_request r = NBC_REQUEST_NULL;
    int rc = MPI_SUCCESS, refused = 1, named = 1;
    char message[400] = "";
    if (rank != 1) {
        rc = nbc_iallreduce(in, out, (int)n, MPI_INT64_T, MPI_SUM, c, &r);
        int rc2 = nbc_free_mem(in), rc3 = nbc_free_mem(out);
        snprintf(message, sizeof message, "%s", nbc_error_message());
        refused = rc2 == MPI_ERR_BUFFER && rc3 == MPI_ERR_BUFFER;
        named = strstr(message, "active allreduce request") != NULL;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) rc = nbc_iallreduce(in, out, (int)n, MPI_INT64_T, MPI_SUM, c, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    long bad = wrong_sums(out, n, 5);
    int rc4 = nbc_free_mem(in) | nbc_free_mem(out);
    MPI_Comm_free(&c);
    check(rc == MPI_SUCCESS && refused && named && !bad && rc4 == MPI_SUCCESS,
          "nbc_free_mem of a block a running allreduce uses is refused with MPI_ERR_BUFFER, naming it; the sums are right",
          "rc %d, refused %d, named %d, %ld wrong sums, freed after %d: %s", rc, refused, named, bad, rc4, message);
}

/* Any-order identities over many inits and frees: ranks free in different orders (odd ranks
 * before the next init, even ranks after it), three requests live all along, and every 250
 * cycles all live requests run, started in an order of each rank's own. No two live requests
 * may share a communicator and a tag, the tags stay below the tag space (NBC_TAG_UB=15 makes it
 * 14 identities a block), the blocks alive stay few (a block whose duplication a peer has not
 * yet reached stays until it has), and the sums are right. */
static void identities(void)
{
    enum { LONG = 3, CYCLES = 6000, N = 4 };
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "nbc_start_order", "any");
    int64_t in[LONG + 2][N], out[LONG + 2][N];
    nbc_request r[LONG + 2] = {NBC_REQUEST_NULL}; /* the long-lived ones, the current one, the one before */
    int rc = MPI_SUCCESS, shared = 0, max_blocks = 0;
    long bad = 0;
    uint64_t w = 0, top_tag = 0;
    for (int k = 0; k < LONG + 2; k++) fill(in[k], N, k);
    for (int k = 0; k < LONG && rc == MPI_SUCCESS; k++)
        rc = nbc_allreduce_init(in[k], out[k], N, MPI_INT64_T, MPI_SUM, c, info, &r[k]);
    for (int i = 0; i < CYCLES && rc == MPI_SUCCESS; i++) {
        int cur = LONG + i % 2, prev = LONG + 1 - i % 2;
        if (rank % 2 && r[prev]) rc = nbc_request_free(&r[prev]);
        if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(in[cur], out[cur], N, MPI_INT64_T, MPI_SUM, c, info, &r[cur]);
        if (rc == MPI_SUCCESS && rank % 2 == 0 && r[prev]) rc = nbc_request_free(&r[prev]);
        if (rc != MPI_SUCCESS) break;
        comm_state *cs = r[cur]->cs;
        w = cs->tag_space - STALL_TAGS;
        int blocks = 0;
        for (any_block *b = cs->blocks; b; b = b->next) blocks++;
        if (blocks > max_blocks) max_blocks = blocks;
        for (int a = 0; a < LONG + 2; a++) {
            if (!r[a]) continue;
            if (r[a]->id % w > top_tag) top_tag = r[a]->id % w;
            for (int b = 0; b < a; b++)
                shared += r[b] && r[b]->block == r[a]->block && r[b]->id % w == r[a]->id % w;
        }
        if (i % 250 == 249) { /* all live ones run, in this rank's order */
            nbc_request live[LONG + 1];
            int n = 0;
            for (int a = 0; a < LONG + 1; a++) live[n++] = r[(a + rank + i / 250) % (LONG + 1) == LONG ? cur : (a + rank + i / 250) % (LONG + 1)];
            for (int a = 0; a < n && rc == MPI_SUCCESS; a++) rc = nbc_start(&live[a]);
            if (rc == MPI_SUCCESS) rc = nbc_waitall(n, live);
            for (int a = 0; a < LONG; a++) bad += wrong_sums(out[a], N, a);
            bad += wrong_sums(out[cur], N, cur);
        }
    }
    char message[300];
    snprintf(message, sizeof message, "%s", nbc_error_message());
    for (int k = 0; k < LONG + 2; k++)
        if (r[k]) nbc_request_free(&r[k]);
    MPI_Info_free(&info);
    MPI_Comm_free(&c);
    check(rc == MPI_SUCCESS && !shared && !bad && top_tag < w && max_blocks <= 64,
          "6000 any-order inits and frees in different orders: no two live requests share a tag, tags and blocks stay bounded, "
          "the sums are right",
          "rc %d, %d shared tags, %ld wrong sums, top tag %llu of %llu, up to %d blocks: %s", rc, shared, bad,
          (unsigned long long)top_tag, (unsigned long long)w, max_blocks, message);
}

/* A block bound to a persistent request is refused too (its next start would use it), until
 * the request is freed. */
static void free_mem_of_persistent(void)
{
    int64_t *in, *out;
    nbc_alloc_mem(64 * 8, &in);
    nbc_alloc_mem(64 * 8, &out);
    fill(in, 64, 6);
    nbc_request r;
    int rc = nbc_allreduce_init(in, out, 64, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    if (rc == MPI_SUCCESS) rc = nbc_start(&r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    long bad = wrong_sums(out, 64, 6);
    int rc2 = nbc_free_mem(out);
    char message[300];
    snprintf(message, sizeof message, "%s", nbc_error_message());
    int rc3 = nbc_request_free(&r);
    int rc4 = nbc_free_mem(in) | nbc_free_mem(out);
    check(rc == MPI_SUCCESS && !bad && rc2 == MPI_ERR_BUFFER && strstr(message, "persistent allreduce request") &&
              rc3 == MPI_SUCCESS && rc4 == MPI_SUCCESS,
          "nbc_free_mem of a block bound to a persistent request is refused until the request is freed",
          "rc %d, %ld wrong sums, free %d then %d %d: %s", rc, bad, rc2, rc3, rc4, message);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL mpi_limits: timed out (a hang)\n";
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(2);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, getenv("NBC_PROGRESS_THREAD") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    signal(SIGALRM, on_alarm);
    alarm(300);
    int small = argc > 1 && !strcmp(argv[1], "--small");
    if (small) { /* under valgrind: the segment made, one shared call */
        int64_t *buf;
        int rc = nbc_alloc_mem(1 << 16, &buf);
        fill(buf, 1 << 13, 1);
        nbc_request r;
        if (rc == MPI_SUCCESS) rc = nbc_iallreduce(MPI_IN_PLACE, buf, 1 << 13, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
        long bad = wrong_sums(buf, 1 << 13, 1);
        nbc_free_mem(buf);
        check(rc == MPI_SUCCESS && !bad, "an allreduce on nbc_alloc_mem memory", "rc %d, %ld wrong", rc, bad);
    } else {
        segment_default();
        free_mem_in_use();
        free_mem_of_persistent();
        identities();
    }
    nbc_finalize();
    int mine[MAX_CHECKS], any[MAX_CHECKS];
    for (int i = 0; i < nchecks; i++) mine[i] = failed[i];
    MPI_Allreduce(mine, any, nchecks, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < nchecks; i++) {
        if (failed[i]) printf("FAIL %s p=%d: rank %d: %s\n", names[i], size, rank, why[i]);
        else if (rank == 0 && !any[i]) printf("ok %s p=%d\n", names[i], size);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
