/* Shared memory between the ranks of one node (docs/shared-memory.md).
 *
 * Each process has one segment: a memfd, mapped here and by the peers of every communicator
 * that attaches (through /proc/PID/fd/FD: the memory has no name, so nothing is left behind
 * when a process ends). Its heap (shm_heap.c) serves nbc_alloc_mem, and each attached
 * communicator's block: for each of CHANNELS channels one line (a call's buffers or "declined",
 * and which call last ended there), and a stage: one flag word per peer, then the shared
 * scratch of SLOT_SHARED.
 * The flags share their cache line with the scratch's first bytes, so that a peer waiting for
 * a small call's flag gets that call's data with it, in one transfer between the cores.
 *
 * Ordered call number seq of a communicator (the same call on every rank, whatever collective)
 * uses channel seq % CHANNELS. It runs there only when no earlier call of that channel that may
 * use shared memory is still active here (so this rank never rewrites a line a peer may still
 * need; a call that failed, or that NBC_CHECK found mismatched, is no longer active) and, when
 * its program uses the stage, after the last call that used that stage has ended on every rank
 * (no peer still reads it).
 * Attaching uses the communicator's top tag, which no call's messages use.
 *
 * The agreement, before a program that names the peers' send or receive buffers (PROG_AGREE):
 * a rank publishes its buffers on its line (as offsets in its segment, or, when they are its
 * private memory and every rank can reach every other's through the kernel, as addresses in
 * its process), or declines, and then reads every peer's. A rank either declines without
 * reading or reads every line, so all choose alike: the shared program when every rank
 * published, the messages' program otherwise. A small call between SHM_DIRECT_MIN_BYTES and
 * the stage's limit agrees the same way, on shared buffers only, between allreduce_shm and the
 * stage's program (which needs no agreement): a rank whose buffers are private declines and
 * takes the stage at once. */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm_heap.h"
#include "state.h"

#define CHANNELS SHM_CHANNELS
#define STAGE_BYTES (64u << 10) /* shared scratch per channel */
#define EXIT_POLL_NS 100000000      /* how often the peers' pidfds are polled: 100 ms, where the
                                       kernel takes far longer to give an exited pid to another */

typedef struct {          /* two cache lines per channel, written by its rank only */
    uint64_t stamp;       /* ticket + 1 once the publication below is written */
    uint64_t declined;    /* this rank runs the messages' program */
    uint64_t send_off, recv_off, len; /* its buffers, as offsets in its segment (or addresses) */
    uint64_t done;        /* ticket + 1 of the last call that ended on this channel */
    uint64_t by_kernel;   /* send_off and recv_off are addresses in its process (private memory) */
    uint64_t using;       /* ticket + 1 while a round of it touches the peers' buffers (interp.c) */
    /* the second line changes only when the rank leaves a call early, so the peers that read
     * it keep it in their caches */
    uint64_t left;        /* ticket + 1 of the last call it left before the call ended */
    uint64_t why;         /* and why: LEFT_* | culprit + 1 << 8 | MPI error class << 32 */
    uint64_t pad2[6];
} pub_line;

/* Why a rank left a call early (the peers print it). */
enum { LEFT_FAILED = 1, LEFT_TIMEOUT, LEFT_PEER, LEFT_ABANDONED, LEFT_NOT_STARTED, LEFT_EMPTY };
static const char *const left_reason[] = {
    [LEFT_FAILED] = "its call failed",
    [LEFT_TIMEOUT] = "its call timed out (NBC_TIMEOUT)",
    [LEFT_PEER] = "another rank left the call first",
    [LEFT_ABANDONED] = "its request was freed or finalized while active",
    [LEFT_NOT_STARTED] = "the call failed there before it started",
    [LEFT_EMPTY] = "it called it with no elements (count 0)",
};

typedef struct {          /* what ranks tell each other when a communicator attaches */
    uint64_t nonce, bytes, block_off;
    uint64_t nonce_at;    /* where the nonce is in its process: a peer reads it through the kernel */
    uint64_t node;        /* its node key (settings.c): ranks on several nodes share nothing */
    int32_t pid, fd, ok, pad;
} hello;

/* A block whose communicator this rank freed, kept until every rank has let go of it: the
 * peers may still be reading this rank's last flags in it. Each rank, when it frees its state
 * of the communicator (after its last call there ended), sets its bit in every rank's
 * `detached` word; a peer whose process has exited counts as detached. */
typedef struct retired {
    uint64_t off;
    int p;
    uint64_t mates;       /* the ranks that map it: those whose bits it waits for */
    shm_map **map;        /* [p]: the peers' processes */
    struct retired *next;
} retired;

/* Attaching: every rank sends its hello, maps the others' segments, then tells the others
 * whether it could map them all (and reach their memory through the kernel); so all end
 * ATTACHED, or all end OFF, and all agree on whether private buffers can be shared. */
enum { HELLO, MAPPED, ATTACHED, SHM_OFF };
enum { MAPPED_ALL = 1, REACHED_ALL = 2 }; /* a rank's answer */

struct shm_comm {
    int state;
    int one_node;         /* every rank is on this node: the one-node programs may run */
    uint64_t mates;       /* the ranks on this rank's node, this one included (bit q) */
    int taking_part;      /* this rank mapped every peer and has not failed: it may publish */
    int by_kernel;        /* every rank reaches every other's memory through the kernel */
    hello mine, *hellos;
    int32_t mapped, *mapped_all; /* this rank's, and every rank's, answer: MAPPED_ALL | REACHED_ALL */
    MPI_Request *reqs;
    int nreqs, tag;
    uint64_t stage_last[CHANNELS]; /* seq + 1 of the last call that used each channel's stage */
    interp_shared *chan;  /* [CHANNELS]: what the interpreter needs of the call on each channel
                             (one at a time on this rank): flags and stages set up once */
    char **seg, **block;  /* [p]: every rank's segment and block, as mapped here */
    shm_map **map;        /* [p]: every peer's process (NULL for this rank) */
    uint64_t *bytes;      /* [p]: their segments' sizes */
};

/* A communicator's block: pub[CHANNELS], then (page-aligned) each channel's stage: a header of
 * the flags raised for each rank `to` (p words) and the `ended` word (rounded up to 16 bytes),
 * then STAGE_BYTES of shared scratch. */
_Static_assert(CHANNELS * sizeof(pub_line) <= 4096, "the channels' lines fit before the first stage");
_Static_assert(sizeof(pub_line) == 128, "a line for the publication, one for the withdrawal");
_Static_assert(CHANNELS * sizeof(pub_line) + sizeof(uint64_t) <= 4096, "the detached word fits too");
static size_t header_bytes(int p) { return ((size_t)(p + 2) * sizeof(uint64_t) + 15) / 16 * 16; }
static size_t channel_bytes(int p) { return (header_bytes(p) + STAGE_BYTES + 4095) / 4096 * 4096; }
static size_t channel_at(int p, int c) { return 4096 + (size_t)c * channel_bytes(p); }
static size_t stage_at(int p, int c) { return channel_at(p, c) + header_bytes(p); }
static size_t block_bytes(int p) { return channel_at(p, CHANNELS); }
static pub_line *pub_of(char *block, int c) { return (pub_line *)(void *)block + c; }
static uint64_t *flag_of(char *block, int p, int c, int to) { return (uint64_t *)(void *)(block + channel_at(p, c)) + to; }
/* Channel c's `ended`: what its rank's pub line of the next channel said (its `done`) when it
 * last ran a shared program on c. A peer that waits for its flags there reads it in the same
 * cache line, so it rarely needs to read that pub line itself (take_stage). */
static uint64_t *ended_of(char *block, int p, int c) { return (uint64_t *)(void *)(block + channel_at(p, c)) + p; }
/* Channel c's `bytes`: the length of the call whose flags follow, stored with the first one; a
 * peer compares it with its own when it sees a flag, in the same cache line. */
static uint64_t *bytes_of(char *block, int p, int c) { return (uint64_t *)(void *)(block + channel_at(p, c)) + p + 1; }
static uint64_t *detached_of(char *block) { return (uint64_t *)(void *)(block + CHANNELS * sizeof(pub_line)); }
static int next_channel(int c) { return (c + 1) % CHANNELS; }
static int channel_before(int c) { return (c + CHANNELS - 1) % CHANNELS; }

int shm_eligible(const comm_state *cs, int coll)
{
    /* not nbc_rt.shm.enabled, which is this rank's own view (NBC_SHM, what the launcher says):
     * the attachment makes it every rank's, so that one rank's "no" sends all to messages */
    return coll == COLL_ALLREDUCE && cs->size > 1 && cs->size <= NBC_SHM_MAX_RANKS;
}

/* ---- attaching a communicator ---- */

/* A peer's process and segment, mapped here (once per process); NULL when it cannot be. */
static shm_map *map_peer(const hello *h)
{
    for (shm_map *m = nbc_rt.shm.maps; m; m = m->next)
        if (m->pid == h->pid && m->fd == h->fd && m->nonce == h->nonce) return m;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return NULL;
    void *b = mmap(NULL, h->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED) return NULL;
    const seg_header *hd = b;
    shm_map *m = malloc(sizeof *m);
    /* another process of that number (another pid namespace) would have another nonce */
    if (!m || hd->magic != SEG_MAGIC || hd->nonce != h->nonce) {
        munmap(b, h->bytes);
        free(m);
        return NULL;
    }
    /* opened before reach_peer() proves the pid is still this process: then the pidfd is it */
    int pidfd = (int)syscall(SYS_pidfd_open, h->pid, 0); /* close-on-exec */
    *m = (shm_map){h->pid, h->fd, h->nonce, h->bytes, b, pidfd, 0, nbc_rt.shm.maps};
    nbc_rt.shm.maps = m;
    return m;
}

/* Posts one exchange with every peer: count bytes from `out`, into `in` + q * count. */
static int exchange(struct shm_comm *sc, comm_state *cs, MPI_Comm comm, const void *out, void *in, int count)
{
    sc->nreqs = 0;
    for (int q = 0; q < cs->size; q++) {
        if (q == cs->rank) continue;
        int rc = MPI_Irecv((char *)in + (size_t)q * (size_t)count, count, MPI_BYTE, q, sc->tag, comm, &sc->reqs[sc->nreqs++]);
        if (rc == MPI_SUCCESS) rc = MPI_Isend(out, count, MPI_BYTE, q, sc->tag, comm, &sc->reqs[sc->nreqs++]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}


/* Frees the retired blocks every rank has let go of. */
void shm_sweep_retired(void)
{
    shm_sweep_lanes();
    for (retired **at = &nbc_rt.shm.retired; *at;) {
        retired *b = *at;
        uint64_t missing = b->mates & ~__atomic_load_n(detached_of(nbc_rt.shm.base + b->off), __ATOMIC_ACQUIRE);
        for (int q = 0; q < b->p; q++)
            if ((missing >> q & 1) && b->map[q] && shm_process_exited(b->map[q])) missing &= ~(1ull << q);
        if (missing) {
            at = &b->next;
            continue;
        }
        shm_heap_free(b->off);
        *at = b->next;
        free(b->map);
        free(b);
    }
}

static int attach_start(comm_state *cs)
{
    int p = cs->size;
    struct shm_comm *sc = calloc(1, sizeof *sc);
    if (!sc) return MPI_ERR_NO_MEM;
    cs->shm = sc;
    sc->hellos = calloc((size_t)p, sizeof *sc->hellos);
    sc->mapped_all = calloc((size_t)p, sizeof *sc->mapped_all);
    sc->reqs = calloc(2 * (size_t)p, sizeof *sc->reqs);
    sc->seg = calloc((size_t)p, sizeof *sc->seg);
    sc->map = calloc((size_t)p, sizeof *sc->map);
    sc->block = calloc((size_t)p, sizeof *sc->block);
    sc->bytes = calloc((size_t)p, sizeof *sc->bytes);
    sc->chan = calloc(CHANNELS, sizeof *sc->chan);
    if (!sc->hellos || !sc->mapped_all || !sc->reqs || !sc->seg || !sc->map || !sc->block || !sc->bytes || !sc->chan) return MPI_ERR_NO_MEM;
    shm_sweep_retired();
    uint64_t off = nbc_rt.shm.enabled && shm_segment() ? shm_heap_alloc(block_bytes(p)) : 0;
    if (off) { /* the lines and flags start at zero (the scratch needs none) */
        memset(nbc_rt.shm.base + off, 0, CHANNELS * sizeof(pub_line) + sizeof(uint64_t));
        for (int c = 0; c < CHANNELS; c++) memset(nbc_rt.shm.base + off + channel_at(p, c), 0, header_bytes(p));
    }
    sc->mine = (hello){nbc_rt.shm.nonce, nbc_rt.shm.bytes, off, (uint64_t)(uintptr_t)&nbc_rt.shm.nonce,
                       nbc_rt.env.node_key, getpid(), nbc_rt.shm.fd, off != 0, 0};
    sc->state = HELLO;
    /* whichever call gets here first (on another rank another call may), the messages carry
     * the tag kept for them */
    sc->tag = (int)(cs->tag_space - 1);
    return exchange(sc, cs, cs->dup.comm, &sc->mine, sc->hellos, sizeof(hello));
}

/* Whether the kernel lets this process read the peer's memory (process_vm_readv: the same
 * user, and no security module forbidding it): it reads the peer's nonce where the peer says
 * it is, which also proves the pid names the peer's process here. */
static int reach_peer(const hello *h)
{
    uint64_t nonce = 0;
    struct iovec local = {&nonce, sizeof nonce}, remote = {(void *)(uintptr_t)h->nonce_at, sizeof nonce};
    return process_vm_readv(h->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof nonce && nonce == h->nonce;
}

/* Maps the segment of every peer on this rank's node (its node key: ranks on other nodes
 * share nothing): MAPPED_ALL when all could be, REACHED_ALL when the kernel can reach all
 * their memory too. */
static int map_all(comm_state *cs, struct shm_comm *sc)
{
    int all = sc->mine.ok, reached = nbc_rt.shm.kernel;
    sc->hellos[cs->rank] = sc->mine;
    if (!all) return 0; /* this rank does not share (NBC_SHM=0, alone on its node, no segment) */
    sc->one_node = 1;
    for (int q = 0; q < cs->size; q++) {
        const hello *h = &sc->hellos[q];
        if (h->node != sc->mine.node) { /* (NBC_NODE_MAP may split one host) */
            sc->one_node = 0;
            continue;
        }
        sc->mates |= 1ull << q;
        sc->map[q] = h->ok && q != cs->rank ? map_peer(h) : NULL;
        sc->seg[q] = !h->ok ? NULL : q == cs->rank ? nbc_rt.shm.base : sc->map[q] ? sc->map[q]->base : NULL;
        sc->bytes[q] = h->bytes;
        if (!sc->seg[q] || h->block_off + block_bytes(cs->size) > h->bytes) {
            sc->seg[q] = NULL;
            all = 0;
            continue;
        }
        sc->block[q] = sc->seg[q] + h->block_off;
        /* the kernel's copies need the pidfd too: a peer that exited must be seen (peer_exited) */
        if (q != cs->rank && reached) reached = sc->map[q]->pidfd >= 0 && reach_peer(h);
    }
    if (reached && !nbc_rt.shm.bounce) nbc_rt.shm.bounce = malloc(3 * SHM_KERNEL_PIECE);
    return all ? MAPPED_ALL | (reached && nbc_rt.shm.bounce ? REACHED_ALL : 0) : 0;
}

/* What stays the same for every call on a channel: the flags and the stages. */
static void set_up_channels(struct shm_comm *sc, int p, int me)
{
    for (int c = 0; c < CHANNELS; c++) {
        interp_shared *sh = &sc->chan[c];
        for (int q = 0; q < p; q++) {
            if (!sc->block[q]) { /* on another node: no program names it (the compiler's check) */
                sh->peer_base[q][SLOT_SHARED] = NULL;
                sh->raise[q] = NULL, sh->seen[q] = sh->left[q] = sh->peer_bytes[q] = NULL;
                continue;
            }
            sh->peer_base[q][SLOT_SHARED] = sc->block[q] + stage_at(p, c);
            sh->raise[q] = flag_of(sc->block[me], p, c, q);
            sh->seen[q] = flag_of(sc->block[q], p, c, me);
            sh->pid[q] = sc->hellos[q].pid;
            sh->left[q] = q == me ? NULL : &pub_of(sc->block[q], c)->left;
            sh->peer_bytes[q] = bytes_of(sc->block[q], p, c);
        }
        sh->bytes_word = bytes_of(sc->block[me], p, c);
        sh->using = &pub_of(sc->block[me], c)->using;
        sh->bounce = nbc_rt.shm.bounce;
    }
}

/* 1 when the communicator is attached (or sharing is off for it), 0 while not yet, < 0 on error. */
static int attach(comm_state *cs)
{
    struct shm_comm *sc = cs->shm;
    if (sc && (sc->state == ATTACHED || sc->state == SHM_OFF)) return 1;
    int rc;
    if (!sc && (rc = attach_start(cs)) != MPI_SUCCESS) return -rc;
    sc = cs->shm;
    int done = 0;
    MPI_Status statuses[2 * NBC_SHM_MAX_RANKS];
    if ((rc = MPI_Testall(sc->nreqs, sc->reqs, &done, statuses)) != MPI_SUCCESS) return -rc;
    if (!done) return 0;
    sc->nreqs = 0;
    if (sc->state == HELLO) {
        sc->mapped = map_all(cs, sc);
        sc->mapped_all[cs->rank] = sc->mapped;
        sc->state = MAPPED;
        if ((rc = exchange(sc, cs, cs->dup.comm, &sc->mapped, sc->mapped_all, sizeof(int32_t))) != MPI_SUCCESS) return -rc;
        return attach(cs);
    }
    sc->state = ATTACHED;
    sc->by_kernel = 1;
    for (int q = 0; q < cs->size; q++) {
        if (!(sc->mapped_all[q] & MAPPED_ALL)) sc->state = SHM_OFF;
        if (!(sc->mapped_all[q] & REACHED_ALL)) sc->by_kernel = 0;
    }
    /* several nodes: only the stage's programs (shm_agree), and only where some node has
     * several ranks (every rank sees every hello, so all decide alike) */
    if (!sc->one_node) {
        sc->by_kernel = 0;
        int shared_node = 0;
        for (int q = 0; q < cs->size && !shared_node; q++)
            for (int t = q + 1; t < cs->size && !shared_node; t++) shared_node = sc->hellos[q].node == sc->hellos[t].node;
        if (!shared_node) sc->state = SHM_OFF;
    }
    sc->taking_part = sc->state == ATTACHED;
    if (sc->state == ATTACHED) set_up_channels(sc, cs->size, cs->rank);
    return 1;
}

void shm_comm_free(comm_state *cs)
{
    struct shm_comm *sc = cs->shm;
    if (!sc) return;
    for (int i = 0; i < sc->nreqs; i++) /* an attachment the peers never answered */
        if (sc->reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&sc->reqs[i]);
            MPI_Request_free(&sc->reqs[i]);
        }
    if (sc->state == ATTACHED) { /* this rank lets go of every rank's block; its own waits for the others */
        retired *b = malloc(sizeof *b);
        for (int q = 0; q < cs->size; q++)
            if (sc->block[q]) __atomic_fetch_or(detached_of(sc->block[q]), 1ull << cs->rank, __ATOMIC_RELEASE);
        if (b) {
            *b = (retired){sc->mine.block_off, cs->size, sc->mates, sc->map, nbc_rt.shm.retired};
            sc->map = NULL;
            nbc_rt.shm.retired = b;
        }
        shm_sweep_retired();
    } else if (sc->mine.ok && sc->nreqs == 0) { /* no peer reads it: attaching ended without sharing */
        shm_heap_free(sc->mine.block_off);
    }
    free(sc->hellos);
    free(sc->mapped_all);
    free(sc->reqs);
    free(sc->seg);
    free(sc->map);
    free(sc->block);
    free(sc->bytes);
    free(sc->chan);
    free(sc);
    cs->shm = NULL;
}

/* ---- the agreement ---- */

/* which: RUN_*; why: what made the ranks decline, for NBC_TRACE=2 (when they share: "", or how) */
static int choose(struct nbc_req *r, int which, const char *why)
{
    int shared = which != RUN_MESSAGES;
    if (nbc_rt.env.trace > 1)
        fprintf(stderr, "nbc: trace: rank %d of %d: allreduce call %llu runs %s%s\n", r->cs->rank, r->cs->size,
                (unsigned long long)r->seq, shared ? "through shared memory" : "with messages: ", why);
    shm_run(r, which, shared ? &r->cs->shm->chan[r->shm_chan] : NULL);
    return 1;
}

void shm_run(struct nbc_req *r, int which, interp_shared *sh)
{
    r->shm_chosen = 1;
    if (sh) nbc_rt.shm.shared_calls++;
    else nbc_rt.shm.message_calls++;
    r->st.prog = cache_entry_program(r->progs[which]);
    r->st.shared = sh;
    r->st.one_round = sh && r->pieces;
    if (sh) r->st.base[SLOT_SHARED] = sh->peer_base[r->cs->rank][SLOT_SHARED];
}

/* The rest of what the interpreter needs to run the shared program on channel c: the buffers
 * of this call (lines: the peers' publications under PROG_AGREE, else NULL: its own only). */
static void fill_shared(struct nbc_req *r, struct shm_comm *sc, int c, const pub_line *const *lines)
{
    int p = r->cs->size, me = r->cs->rank;
    interp_shared *sh = &sc->chan[c];
    sh->by_kernel = 0;
    for (int q = 0; q < p; q++) {
        if (lines && q != me && lines[q]->by_kernel) { /* addresses in q's process */
            sh->peer_base[q][SLOT_SEND] = (char *)(uintptr_t)lines[q]->send_off;
            sh->peer_base[q][SLOT_RECV] = (char *)(uintptr_t)lines[q]->recv_off;
            sh->by_kernel |= 1ull << q;
        } else if (lines && q != me) {
            sh->peer_base[q][SLOT_SEND] = sc->seg[q] + lines[q]->send_off;
            sh->peer_base[q][SLOT_RECV] = sc->seg[q] + lines[q]->recv_off;
        } else {
            sh->peer_base[q][SLOT_SEND] = sh->peer_base[q][SLOT_RECV] = NULL;
        }
        sh->raised[q] = sh->awaited[q] = 0;
    }
    sh->peer_base[me][SLOT_SEND] = r->st.base[SLOT_SEND];
    sh->peer_base[me][SLOT_RECV] = r->st.base[SLOT_RECV];
    sh->stamp = (r->seq + 1) << 20; /* above every flag of the calls before on this channel */
    sh->nwaiting = 0;
    sh->guard = lines ? p : 0;
    sh->left_peer = sh->other_bytes_peer = -1;
    sh->bytes = (uint64_t)r->sig.count * (uint64_t)r->sig.esize;
    /* stored with this call's first flag (a program without flags leaves the word older, which
     * take_stage's peers read as "look at the pub line") */
    sh->ended = ended_of(sc->block[me], p, c);
    sh->ended_value = pub_of(sc->block[me], next_channel(c))->done;
}

/* ---- leaving a call (docs/hardening.md: the withdrawal rule) ---- */

/* Fails r because rank q left its call, naming q and q's reason. */
static int fail_left(struct nbc_req *r, struct shm_comm *sc, int q)
{
    char why[MPI_MAX_ERROR_STRING + 96];
    shm_left_text(__atomic_load_n(&pub_of(sc->block[q], (int)(r->seq % CHANNELS))->why, __ATOMIC_RELAXED), why, sizeof why);
    r->shm_culprit = q;
    req_fail(r, MPI_ERR_OTHER, "allreduce call %llu on shared memory: rank %d left it before it ended: %s", (unsigned long long)r->seq, q, why);
    return -MPI_ERR_OTHER;
}

void shm_left_text(uint64_t why, char *out, size_t size)
{
    unsigned reason = (unsigned)(why & 0xff), culprit = (unsigned)(why >> 8 & 0xffffff);
    int cls = (int)(why >> 32);
    char text[MPI_MAX_ERROR_STRING] = "", first[48] = "";
    int len = 0;
    if (reason == LEFT_FAILED && MPI_Error_string(cls, text, &len) != MPI_SUCCESS) text[0] = '\0';
    if (reason == LEFT_PEER && culprit > 0) snprintf(first, sizeof first, " (rank %u)", culprit - 1);
    snprintf(out, size, "%s%s%s%s", reason < sizeof left_reason / sizeof *left_reason && left_reason[reason] ? left_reason[reason] : "unknown",
             first, text[0] ? ": " : "", text);
}

/* In the agreement, peer q has not published this call: 0 while it may still, or fails r
 * once q has left it. */
static int left_already(struct nbc_req *r, struct shm_comm *sc, int q)
{
    if (__atomic_load_n(&pub_of(sc->block[q], (int)(r->seq % CHANNELS))->left, __ATOMIC_ACQUIRE) != r->seq + 1) return 0;
    return fail_left(r, sc, q);
}

/* Rank q called call r->seq with `theirs` bytes, this rank with `mine` (MPI: erroneous; here an
 * error on every rank, never a wrong sum or a hang). */
static int fail_bytes(struct nbc_req *r, int q, uint64_t theirs, uint64_t mine)
{
    r->shm_culprit = -1;
    req_fail(r, MPI_ERR_COUNT, "allreduce call %llu on shared memory: rank %d called it with %llu bytes, this rank with %llu",
             (unsigned long long)r->seq, q, (unsigned long long)theirs, (unsigned long long)mine);
    return -MPI_ERR_COUNT;
}

/* The interpreter found a peer gone, or one that called with another length (interp_shared):
 * r's message names it. */
void shm_explain(struct nbc_req *r)
{
    const interp_shared *sh = r->st.shared;
    if (!sh || !r->cs->shm) return;
    if (r->any_order) {
        shm_lane_explain(r);
        return;
    }
    if (sh->left_peer >= 0) fail_left(r, r->cs->shm, sh->left_peer);
    else if (sh->other_bytes_peer >= 0) fail_bytes(r, sh->other_bytes_peer, *sh->peer_bytes[sh->other_bytes_peer], sh->bytes);
}

int shm_process_exited(const shm_map *m)
{
    struct pollfd f = {m->pidfd, POLLIN, 0};
    return m->exited || (m->pidfd >= 0 && poll(&f, 1, 0) > 0);
}

/* What this rank's line says of why it leaves r's call. */
uint64_t shm_why_leaving(const struct nbc_req *r)
{
    if (r->shm_culprit >= 0) return LEFT_PEER | (uint64_t)(r->shm_culprit + 1) << 8 | (uint64_t)MPI_ERR_OTHER << 32;
    if (r->st.err == MPI_SUCCESS) return LEFT_ABANDONED;
    int cls = MPI_ERR_OTHER;
    MPI_Error_class(r->st.err, &cls);
    return (uint64_t)(r->timed_out ? LEFT_TIMEOUT : LEFT_FAILED) | (uint64_t)(uint32_t)cls << 32;
}

/* Leaves call `seq` before it ended: says so on the channel's line (the peers then fail it
 * too, naming this rank), and, when the peers were told where this rank's buffers are, waits
 * until none is inside a round that touches them (interp.c's guard: each such round is a
 * bounded piece of copying, never a wait for this rank). After this no peer reads or writes
 * them again. */
static void withdraw(struct shm_comm *sc, int p, int me, uint64_t seq, uint64_t why, int published)
{
    int c = (int)(seq % CHANNELS);
    pub_line *mine = pub_of(sc->block[me], c);
    __atomic_store_n(&mine->why, why, __ATOMIC_RELAXED);
    __atomic_store_n(&mine->left, seq + 1, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!published) return;
    for (int q = 0; q < p; q++) {
        if (q == me) continue;
        const uint64_t *in_use = &pub_of(sc->block[q], c)->using;
        while (__atomic_load_n(in_use, __ATOMIC_ACQUIRE) == seq + 1 && !(sc->map[q] && shm_process_exited(sc->map[q])))
            sched_yield();
    }
}

void shm_not_started(comm_state *cs, uint64_t seq, int err)
{
    struct shm_comm *sc = cs->shm;
    int cls = MPI_ERR_OTHER;
    MPI_Error_class(err, &cls);
    if (sc && sc->state == ATTACHED) withdraw(sc, cs->size, cs->rank, seq, LEFT_NOT_STARTED | (uint64_t)(uint32_t)cls << 32, 0);
}

/* Whether an earlier call of r's channel that may use shared memory is still active here. */
static int channel_busy(const struct nbc_req *r)
{
    for (const struct nbc_req *a = req_first_active(); a; a = a->next)
        if (a != r && a->cs == r->cs && a->progs[RUN_SHARED] && !a->any_order && a->seq < r->seq && a->seq % CHANNELS == r->seq % CHANNELS)
            return 1;
    return 0;
}

/* Whether a peer of the communicator has exited. A pid is only a number:
 * once its process has exited the kernel may give it to another, whose memory a copy through
 * the kernel would then reach. The pidfds are polled at most every EXIT_POLL_NS (a call that
 * may reach private memory costs microseconds; the kernel gives a pid again only after all
 * the others, far later). A peer that exits later still answers no flag: its call times out. */
static int peer_exited(const struct shm_comm *sc, int p)
{
    long now = now_ns();
    if (now - nbc_rt.shm.polled_ns >= EXIT_POLL_NS) {
        nbc_rt.shm.polled_ns = now;
        for (shm_map *m = nbc_rt.shm.maps; m; m = m->next) {
            struct pollfd f = {m->pidfd, POLLIN, 0};
            if (m->pidfd >= 0 && !m->exited && poll(&f, 1, 0) > 0) m->exited = 1;
        }
    }
    for (int q = 0; q < p; q++)
        if (sc->map[q] && sc->map[q]->exited) return 1;
    return 0;
}

/* Whether every rank has ended the last call that used channel c's stage (so none still reads
 * this rank's); then this call is its last user. Which calls use a stage is the same on every
 * rank, so stage_last is too. A peer's `ended` on the channel before, in the line of the flags
 * this rank last waited for there, usually says so already; its pub line (written at the end
 * of each of its calls, so another core's to read) is read only when it does not. */
static int take_stage(struct shm_comm *sc, const struct nbc_req *r, int c)
{
    int p = r->cs->size, before = channel_before(c);
    for (int q = 0; q < p; q++) /* (the ranks of other nodes never read it) */
        if (sc->block[q] && __atomic_load_n(ended_of(sc->block[q], p, before), __ATOMIC_ACQUIRE) < sc->stage_last[c] &&
            __atomic_load_n(&pub_of(sc->block[q], c)->done, __ATOMIC_ACQUIRE) < sc->stage_last[c])
            return 0;
    sc->stage_last[c] = r->seq + 1;
    return 1;
}

/* Publishes that this rank runs no program that reads the peers' buffers in r's call (the
 * stage, or messages), with the call's length, which a peer reading the lines compares. */
static void decline(struct nbc_req *r, pub_line *mine)
{
    mine->declined = 1;
    mine->len = (uint64_t)r->sig.count * (uint64_t)r->sig.esize;
    __atomic_store_n(&mine->stamp, r->seq + 1, __ATOMIC_RELEASE);
    r->shm_published = 1;
}

/* The stage's program (no PROG_AGREE: no buffers to agree on) on channel c: 0 while the
 * stage is in use, else 1. */
static int staged(struct nbc_req *r, struct shm_comm *sc, int c)
{
    const nbc_program *prog = cache_entry_program(r->progs[RUN_SHARED]);
    /* a peer whose call reads the lines (another length) sees this one */
    if (!r->shm_published) decline(r, pub_of(sc->block[r->cs->rank], c));
    if (prog->shared_bytes > STAGE_BYTES) return choose(r, RUN_MESSAGES, "the program's shared scratch is larger than the stage");
    if (prog->shared_bytes && !take_stage(sc, r, c)) return 0;
    fill_shared(r, sc, c, NULL);
    return choose(r, RUN_SHARED, "");
}

/* The agreement on the buffers, on channel c, for a program that reads the peers' (PROG_AGREE):
 * the shared one, whose fallback is the messages' program, or (direct) the direct one, whose
 * fallback is the stage's (RUN_*). With direct, private buffers go to the stage, not through the kernel
 * (its copies cost microseconds), and shm_agree has a rank whose buffers are private decline
 * at once, without waiting: only ranks whose buffers are all shared read the others' lines, so
 * a call on private buffers waits for no one more than the stage does. Returns as shm_agree
 * does, or 2: run the stage's program. */
static int agree_buffers(struct nbc_req *r, struct shm_comm *sc, int c, int direct)
{
    int which = direct ? RUN_DIRECT : RUN_SHARED;
    const nbc_program *prog = cache_entry_program(r->progs[which]);
    int p = r->cs->size, me = r->cs->rank;
    uint64_t len = (uint64_t)r->sig.count * (uint64_t)r->sig.esize;
    if (!r->shm_published) {
        pub_line *mine = pub_of(sc->block[me], c);
        char *send = r->st.base[SLOT_SEND], *recv = r->st.base[SLOT_RECV];
        int64_t send_off = shm_segment_offset(send, len), recv_off = shm_segment_offset(recv, len);
        /* private memory: the peers copy through the kernel, a piece of whole elements at a time */
        int by_kernel = !direct && (send_off < 0 || recv_off < 0) && sc->by_kernel && (uint64_t)r->sig.esize <= SHM_KERNEL_PIECE;
        /* a peer's private buffers too are reached through the kernel: none may have exited */
        int exited = !direct && sc->by_kernel && peer_exited(sc, p);
        int ok = sc->taking_part && !exited && ((send_off >= 0 && recv_off >= 0) || by_kernel);
        mine->declined = !ok;
        mine->by_kernel = (uint64_t)by_kernel;
        mine->send_off = by_kernel ? (uint64_t)(uintptr_t)send : (uint64_t)send_off;
        mine->recv_off = by_kernel ? (uint64_t)(uintptr_t)recv : (uint64_t)recv_off;
        mine->len = len;
        __atomic_store_n(&mine->stamp, r->seq + 1, __ATOMIC_RELEASE);
        r->shm_published = 1;
        if (!ok && direct) return 2; /* shm_agree declines private buffers first; never the messages' here */
        if (!ok)
            return choose(r, RUN_MESSAGES, !sc->taking_part ? "this rank failed earlier"
                                         : exited         ? "a peer's process has exited"
                                         : sc->by_kernel  ? "its elements are larger than the kernel's pieces"
                                                          : "this rank's buffers are not from nbc_alloc_mem, and the kernel cannot reach them");
    }
    const pub_line *lines[NBC_SHM_MAX_RANKS];
    int all = 1, by_kernel = 0;
    lines[me] = pub_of(sc->block[me], c); /* not read by fill_shared: set for the compiler */
    for (int q = 0; q < p; q++) {
        if (q == me) continue;
        lines[q] = pub_of(sc->block[q], c);
        if (__atomic_load_n(&lines[q]->stamp, __ATOMIC_ACQUIRE) != r->seq + 1) return left_already(r, sc, q);
        if (lines[q]->len != len) return fail_bytes(r, q, lines[q]->len, len);
        if (lines[q]->declined) all = 0;
        else if (lines[q]->by_kernel) by_kernel = 1;             /* the kernel checks the addresses */
        else if (len > sc->bytes[q] || lines[q]->send_off > sc->bytes[q] - len || lines[q]->recv_off > sc->bytes[q] - len) {
            req_fail(r, MPI_ERR_INTERN, "rank %d published buffers outside its shared segment", q);
            return -MPI_ERR_INTERN;
        }
    }
    if (!all) return direct ? 2 : choose(r, RUN_MESSAGES, "another rank declined");
    if (prog->shared_bytes > STAGE_BYTES) return direct ? 2 : choose(r, RUN_MESSAGES, "the program's shared scratch is larger than the stage");
    if (prog->shared_bytes && !take_stage(sc, r, c)) return 0;
    fill_shared(r, sc, c, lines);
    nbc_rt.shm.direct_calls += (uint64_t)direct;
    if (!by_kernel) return choose(r, which, direct ? ", straight from the peers' buffers" : "");
    nbc_rt.shm.kernel_calls++;
    sc->chan[c].piece = SHM_KERNEL_PIECE / (uint64_t)r->sig.esize * (uint64_t)r->sig.esize;
    return choose(r, RUN_SHARED, ", the private buffers through the kernel");
}

int shm_agree(struct nbc_req *r)
{
    if (r->shm_chosen) return 1;
    comm_state *cs = r->cs;
    int rc = cs->shm && cs->shm->state == ATTACHED ? 1 : attach(cs);
    if (rc < 0) {
        req_fail(r, -rc, "attaching the communicator's shared memory failed");
        return rc;
    }
    if (rc == 0) return 0;
    struct shm_comm *sc = cs->shm;
    if (sc->state == SHM_OFF) return choose(r, RUN_MESSAGES, "no two ranks share memory, or one cannot (NBC_SHM=0, a segment its node cannot map)");
    /* several nodes: the node programs (calls.c's node_programs) need no agreement on buffers,
     * which would have to span the nodes */
    if (!sc->one_node && (r->progs[RUN_DIRECT] || (cache_entry_program(r->progs[RUN_SHARED])->flags & PROG_AGREE)))
        return choose(r, RUN_MESSAGES, "the ranks are on several nodes");
    int c = (int)(r->seq % CHANNELS);
    if (r->shm_chan < 0 && channel_busy(r)) return 0;
    r->shm_chan = c;
    if (r->progs[RUN_DIRECT]) { /* then the shared one is the stage's */
        pub_line *mine = pub_of(sc->block[cs->rank], c);
        if (!r->shm_published) {
            uint64_t len = (uint64_t)r->sig.count * (uint64_t)r->sig.esize;
            /* private buffers, the common case: declined at once, without agree_buffers' work */
            if (!sc->taking_part || shm_segment_offset(r->st.base[SLOT_SEND], len) < 0 || shm_segment_offset(r->st.base[SLOT_RECV], len) < 0)
                decline(r, mine);
        }
        if (!(r->shm_published && mine->declined) && (rc = agree_buffers(r, sc, c, 1)) != 2) return rc;
    } else if (cache_entry_program(r->progs[RUN_SHARED])->flags & PROG_AGREE) {
        return agree_buffers(r, sc, c, 0);
    }
    return staged(r, sc, c);
}

void shm_end(struct nbc_req *r)
{
    if (!r->shm_in_call) return;
    r->shm_in_call = 0;
    if (r->any_order) {
        shm_lane_end(r);
        return;
    }
    struct shm_comm *sc = r->cs ? r->cs->shm : NULL;
    if (sc && sc->state == ATTACHED) {
        int me = r->cs->rank;
        /* anything but a program run to its end without error leaves the call early */
        if (r->st.err != MPI_SUCCESS || r->st.round < r->st.prog->nrounds) {
            const pub_line *mine = pub_of(sc->block[me], (int)(r->seq % CHANNELS));
            withdraw(sc, r->cs->size, me, r->seq, shm_why_leaving(r), r->shm_published && !mine->declined);
            /* flags the peers cannot trust: this rank declines from now on, which they see */
            if (r->st.shared) sc->taking_part = 0;
        } else if (r->sig.count == 0 && r->st.shared) { /* no flags: a peer called with elements would wait for them */
            withdraw(sc, r->cs->size, me, r->seq, LEFT_EMPTY, 0);
        }
        if (r->shm_chan >= 0) __atomic_store_n(&pub_of(sc->block[me], r->shm_chan)->done, r->seq + 1, __ATOMIC_RELEASE);
    }
    r->st.shared = NULL; /* the channel's, which the next call on it takes */
    r->shm_chan = -1;
}

/* For stall reports (stall.c): what rank q of r's communicator last did on the shared block,
 * read from its lines without any message: the last call it published on a channel (and
 * whether it declined), the last it ended, and the flags it raised for this rank in r's call.
 * Relaxed loads: a report, not a decision. 0 when the communicator is not attached. */
int shm_describe_peer(const struct nbc_req *r, int q, char *buf, size_t size)
{
    const struct shm_comm *sc = r->cs ? r->cs->shm : NULL;
    int p = r->cs ? r->cs->size : 0, me = r->cs ? r->cs->rank : 0;
    if (!sc || sc->state != ATTACHED || q < 0 || q >= p || q == me || !sc->block[q]) return 0;
    uint64_t published = 0, ended = 0, declined = 0;
    for (int c = 0; c < CHANNELS; c++) {
        const pub_line *l = pub_of(sc->block[q], c);
        uint64_t s = __atomic_load_n(&l->stamp, __ATOMIC_RELAXED), d = __atomic_load_n(&l->done, __ATOMIC_RELAXED);
        if (s > published) published = s, declined = __atomic_load_n(&l->declined, __ATOMIC_RELAXED);
        if (d > ended) ended = d;
    }
    int n = snprintf(buf, size, "rank %d's line: ", q);
    if (n < 0 || (size_t)n >= size) return n;
    n += ended ? snprintf(buf + n, size - (size_t)n, "last ended call #%llu", (unsigned long long)(ended - 1))
               : snprintf(buf + n, size - (size_t)n, "has ended no call that may share memory");
    if (published && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", last published call #%llu%s", (unsigned long long)(published - 1),
                      declined ? " (declined)" : "");
    if (!r->any_order && (size_t)n < size) { /* its last flag for this rank on r's channel: (call + 1) << 20 + count */
        uint64_t f = __atomic_load_n(flag_of(sc->block[q], p, (int)(r->seq % CHANNELS), me), __ATOMIC_RELAXED);
        n += f >> 20 ? snprintf(buf + n, size - (size_t)n, ", its last flag for rank %d on channel %d: #%llu of call #%llu", me,
                                (int)(r->seq % CHANNELS), (unsigned long long)(f & ((1u << 20) - 1)), (unsigned long long)((f >> 20) - 1))
                     : snprintf(buf + n, size - (size_t)n, ", no flag for rank %d on channel %d yet", me, (int)(r->seq % CHANNELS));
    }
    return n;
}

/* ---- what any-order requests (shm_lane.c) need of their communicator's attachment ---- */

int shm_comm_view(comm_state *cs, shm_view *v, const char **why_not)
{
    int rc = cs->shm && cs->shm->state == ATTACHED ? 1 : attach(cs);
    if (rc <= 0) return rc;
    const struct shm_comm *sc = cs->shm;
    /* what every rank sees alike (the attachment's outcome): a reason for all to use messages */
    *why_not = sc->state == SHM_OFF ? "no two ranks share memory, or one cannot (NBC_SHM=0, a segment its node cannot map)"
             : !sc->one_node        ? "the ranks are on several nodes"
                                    : NULL;
    if (*why_not) return 1;
    *v = (shm_view){.seg = sc->seg, .bytes = sc->bytes, .map = sc->map, .by_kernel = sc->by_kernel, .taking_part = sc->taking_part};
    for (int q = 0; q < cs->size; q++) v->pid[q] = sc->hellos[q].pid;
    return 1;
}

void shm_comm_distrust(comm_state *cs)
{
    if (cs->shm) cs->shm->taking_part = 0;
}

int shm_comm_peer_exited(const comm_state *cs) { return cs->shm && peer_exited(cs->shm, cs->size); }
