/* COPY, REDUCE and COMBINE on a peer's private memory (docs/shared-memory.md).
 *
 * A peer's send and receive buffers are mapped here only when they are in its segment
 * (nbc_alloc_mem). Any other buffer of a process on this node is still reachable through the
 * kernel: process_vm_readv and process_vm_writev copy between two processes' memory in one
 * pass, the single copy that Open MPI's and MPICH's shared-memory transports use for large
 * messages. The instruction runs piece by piece: each peer operand it reads is copied into a
 * bounce piece here (still in cache when the reduction reads it), the reduction runs on local
 * memory, and a peer operand it writes is copied out. A COPY needs no bounce at all: the
 * kernel copies straight between its two buffers. */
#include <errno.h>
#include <sys/uio.h>

#include "remote.h"

/* Whether operand `slot` of an instruction is a peer's buffer that only the kernel reaches. */
static int is_remote(const interp_shared *sh, unsigned slot, int32_t peer)
{
    return (slot & SLOT_PEER) && SLOT_INDEX(slot) != SLOT_SHARED && (sh->by_kernel >> peer & 1);
}

int remote_names(const interp_shared *sh, const nbc_insn *in)
{
    unsigned ops = prog_operands(in->op);
    return in->peer >= 0 && ((ops & OPND_A && is_remote(sh, in->a_slot, in->peer)) ||
                             (ops & OPND_B && is_remote(sh, in->b_slot, in->peer)) ||
                             (ops & OPND_C && is_remote(sh, in->c_slot, in->peer)));
}

/* len bytes between here and `there` in process pid, whole or an errno. */
static int kernel_copy(int32_t pid, void *here, char *there, uint64_t len, int write)
{
    while (len > 0) {
        struct iovec local = {here, len}, remote = {there, len};
        ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0) : process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EFAULT;
        here = (char *)here + n, there += n, len -= (uint64_t)n;
    }
    return 0;
}

int remote_run(interp_state *st, const nbc_insn *in)
{
    const interp_shared *sh = st->shared;
    const unsigned slot[3] = {in->a_slot, in->b_slot, in->c_slot}, bit[3] = {OPND_A, OPND_B, OPND_C};
    const uint64_t off[3] = {in->a_off, in->b_off, in->c_off};
    const nbc_opinfo *info = prog_opinfo(in->op);
    int32_t pid = sh->pid[in->peer];
    char *at[3] = {NULL, NULL, NULL};
    int remote[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        if ((info->reads | info->writes) & bit[k]) {
            remote[k] = is_remote(sh, slot[k], in->peer);
            at[k] = (slot[k] & SLOT_PEER ? sh->peer_base[in->peer][SLOT_INDEX(slot[k])] : st->base[slot[k]]) + off[k];
        }
    int err = 0, direct = in->op == OP_COPY && remote[0] != remote[1];
    if (direct) /* one of the two buffers is here: the kernel copies between them in one pass */
        err = kernel_copy(pid, remote[0] ? at[1] : at[0], remote[0] ? at[0] : at[1], in->len, remote[0]);
    /* COMBINE a := b ⊕ c with a here and one input remote: the kernel copies that input into a,
     * then a REDUCE with the other (a := b ⊕ a; with b remote, a := c ⊕ a, which is the same
     * only for commutative ops: the predefined ones, those with kernels). No bounce; each
     * piece is still in cache when it is reduced. */
    int fused = in->op == OP_COMBINE && !remote[0] && remote[1] != remote[2] && (remote[2] || st->kernel);
    int other = remote[2] ? 1 : 2; /* (fused) the input that is here */
    for (uint64_t done = 0; fused && !err && done < in->len; done += sh->piece) {
        uint64_t n = in->len - done < sh->piece ? in->len - done : sh->piece;
        if ((err = kernel_copy(pid, at[0] + done, at[3 - other] + done, n, 0))) break;
        int rc = interp_compute(st, OP_REDUCE, at[0] + done, at[other] + done, NULL, n);
        if (rc != MPI_SUCCESS) return rc;
    }
    for (uint64_t done = 0; !direct && !fused && !err && done < in->len; done += sh->piece) {
        uint64_t n = in->len - done < sh->piece ? in->len - done : sh->piece;
        char *here[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3 && !err; k++) {
            if (!at[k]) continue;
            here[k] = remote[k] ? sh->bounce + (uint64_t)k * sh->piece : at[k] + done;
            if (remote[k] && info->reads & bit[k]) err = kernel_copy(pid, here[k], at[k] + done, n, 0);
        }
        if (err) break;
        int rc = interp_compute(st, in->op, here[0], here[1], here[2], n);
        if (rc != MPI_SUCCESS) return rc;
        if (remote[0]) err = kernel_copy(pid, here[0], at[0] + done, n, 1);
    }
    if (!err) return MPI_SUCCESS;
    st->err_errno = err;
    st->err_pc = (int)(in - prog_insns(st->prog));
    return MPI_ERR_OTHER;
}
