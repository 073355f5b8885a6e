/* The library's environment, read once at nbc_init into nbc_rt.env. Every variable goes
 * through env.c, so a bad value of any of them fails nbc_init with a message naming it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "env.h"
#include "state.h"

/* How many ranks share this node, from whichever launcher started us: MPICH's Hydra, Open
 * MPI's, or a PMI that sets MPI_LOCAL_NRANKS (0: unknown, and then nbc does not spin). An
 * environment variable, not MPI_Comm_split_type: that would be a blocking collective. These
 * are the launcher's, not the user's: a value that is not a count just means "unknown". */
static long local_ranks(void)
{
    static const char *vars[] = {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCAL_NRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        uint64_t n;
        if (env_uint(vars[i], 0, 1u << 30, &n, NULL, 0) == 0 && n > 0) return (long)n;
    }
    return 0;
}

/* Which node this process is on, as a hash of the node's name: by default the host's name
 * (what MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) goes by in MPICH and Open MPI). NBC_NODE_MAP
 * names the node of every rank of MPI_COMM_WORLD instead, a comma-separated list in rank order
 * (any labels: "a,a,b,b", "0,1,0,1"): a topology for testing on one machine, or a finer one
 * (a socket a node). Communicators learn their ranks' nodes from these (comm.c). */
static int node_key(uint64_t *key, char *err, size_t errsize)
{
    const char *map;
    if (env_text("NBC_NODE_MAP", &map, err, errsize)) return -1;
    char name[256] = "";
    if (!map) {
        if (gethostname(name, sizeof name - 1) != 0) strcpy(name, "localhost");
        *key = XXH3_64bits(name, strlen(name));
        return 0;
    }
    int world = 0, me = 0, n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *at = map, *mine = NULL;
    size_t len = 0;
    for (;;) { /* entry n is [at, comma) */
        const char *comma = strchr(at, ',');
        size_t l = comma ? (size_t)(comma - at) : strlen(at);
        if (l == 0) {
            snprintf(err, errsize, "NBC_NODE_MAP: entry %d is empty (want one node name a rank, comma-separated)", n);
            return -1;
        }
        if (n == me) mine = at, len = l;
        n++;
        if (!comma) break;
        at = comma + 1;
    }
    if (n != world) {
        snprintf(err, errsize, "NBC_NODE_MAP: names %d ranks, MPI_COMM_WORLD has %d", n, world);
        return -1;
    }
    *key = XXH3_64bits(mine, len);
    return 0;
}

int settings_read(void)
{
    nbc_settings *s = &nbc_rt.env;
    char err[300];
    uint64_t spin_us, preempt_us, trace;
    /* Spinning a little saves a trip through the scheduler when each rank has a core of its
     * own; with more ranks than cores it only steals time from the peers we wait for. */
    long local = local_ranks(), cores = sysconf(_SC_NPROCESSORS_ONLN);
    int bad = env_uint("NBC_CACHE_ENTRIES", 1024, SIZE_MAX, &s->cache_entries, err, sizeof err) ||
              env_uint("NBC_CACHE_BYTES", 64u << 20, SIZE_MAX, &s->cache_bytes, err, sizeof err) ||
              env_uint("NBC_MAX_INSNS", 0, UINT32_MAX - 1, &s->max_insns, err, sizeof err) ||
              env_uint("NBC_TAG_UB", 0, INT32_MAX, &s->tag_ub, err, sizeof err) ||
              env_uint("NBC_SPIN_US", local > 0 && local <= cores ? 20 : 0, 1000000000, &spin_us, err, sizeof err) ||
              env_uint("NBC_PREEMPT_US", 500, 1000000000, &preempt_us, err, sizeof err) ||
              env_seconds("NBC_STALL_WARNING", 60, 1e6, &s->stall_ns, err, sizeof err) ||
              env_seconds("NBC_TIMEOUT", 0, 1e6, &s->timeout_ns, err, sizeof err) ||
              env_bool("NBC_CHECK", 0, &s->check, err, sizeof err) ||
              env_uint("NBC_TRACE", 0, 2, &trace, err, sizeof err) ||
              env_bool("NBC_PROGRESS_THREAD", 0, &s->progress_thread, err, sizeof err) ||
              env_text("NBC_SCHEDULE_PATH", &s->schedule_path, err, sizeof err) ||
              env_text("NBC_TUNING", &s->tuning, err, sizeof err) ||
              env_text("NBC_MODEL_FILE", &s->model_file, err, sizeof err) ||
              env_text("NBC_SELECT", &s->select, err, sizeof err) ||
              node_key(&s->node_key, err, sizeof err);
    for (int c = 0; c < COLL_COUNT_ && !bad; c++) {
        char var[64] = "NBC_"; /* NBC_ALLREDUCE, NBC_REDUCE_SCATTER, ... */
        for (const char *n = collective_names[c]; *n; n++) {
            size_t l = strlen(var);
            var[l] = (char)(*n >= 'a' && *n <= 'z' ? *n - 32 : *n);
            var[l + 1] = '\0';
        }
        bad = env_text(var, &s->forced[c], err, sizeof err);
    }
    if (bad) return nbc_fail(MPI_ERR_ARG, "%s", err);
    if (s->tag_ub && s->tag_ub < 3) return nbc_fail(MPI_ERR_ARG, "NBC_TAG_UB: %llu is less than 3", (unsigned long long)s->tag_ub);
    s->local_ranks = local;
    s->spin_ns = (long)spin_us * 1000;
    s->preempt_ns = (long)preempt_us * 1000;
    s->trace = (int)trace;
    return MPI_SUCCESS;
}
