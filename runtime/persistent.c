/* Persistent requests (MPI-4's MPI_Allreduce_init .. MPI_Start): the call is checked, the
 * schedule chosen and compiled once, at init; each start only resets the interpreter and takes
 * a tag, so it allocates nothing and looks nothing up.
 *
 * An any-order request (info nbc_start_order=any) gets an identity at init, which every rank
 * makes in the same order, so the identity is the same everywhere: its messages use it as
 * their tag on a communicator of their own. MPI's matching then does what Total Reduce's
 * message headers do: a message for a request this rank has not started yet waits in MPI's
 * queue of unexpected messages until the receive is posted at its start. Successive starts of
 * one request reuse the tag safely: a rank finishes a start before it can begin the next, and
 * MPI delivers messages between two ranks with one tag in the order they were sent. */
#include "nbc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "internal.h"

typedef struct {
    int any_order, priority, has_priority;
    int64_t chunk_bytes;
    char name[48];
} init_options;

static int info_get(MPI_Info info, const char *key, char *value, int size, int *found)
{
    *found = 0;
    if (info == MPI_INFO_NULL) return MPI_SUCCESS;
    int len = 0;
    if (MPI_Info_get_valuelen(info, key, &len, found) != MPI_SUCCESS) return nbc_fail(MPI_ERR_INFO, "invalid info");
    if (!*found) return MPI_SUCCESS;
    if (len >= size) return nbc_fail(MPI_ERR_INFO_VALUE, "info %s: the value is too long (at most %d characters)", key, size - 1);
    MPI_Info_get(info, key, size - 1, value, found);
    value[len] = '\0';
    return MPI_SUCCESS;
}

static int parse_int(const char *key, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return nbc_fail(MPI_ERR_INFO_VALUE, "info %s: '%s' is not an integer in %lld .. %lld", key, v, lo, hi);
    *out = x;
    return MPI_SUCCESS;
}

/* Large requests that may be preempted are cut into chunks of this many bytes by default. */
#define DEFAULT_CHUNK (1 << 20)

static int read_options(MPI_Info info, init_options *o)
{
    char v[64];
    int found, rc;
    long long x;
    memset(o, 0, sizeof *o);
    if ((rc = info_get(info, "nbc_start_order", v, sizeof v, &found))) return rc;
    if (found) {
        if (!strcmp(v, "any")) o->any_order = 1;
        else if (strcmp(v, "same")) return nbc_fail(MPI_ERR_INFO_VALUE, "info nbc_start_order: '%s' is not 'same' or 'any'", v);
    }
    if ((rc = info_get(info, "nbc_priority", v, sizeof v, &found))) return rc;
    if (found) {
        if ((rc = parse_int("nbc_priority", v, -1000000000, 1000000000, &x))) return rc;
        o->priority = (int)x;
        o->has_priority = 1;
    }
    o->chunk_bytes = o->any_order || o->has_priority ? DEFAULT_CHUNK : 0;
    if ((rc = info_get(info, "nbc_chunk_bytes", v, sizeof v, &found))) return rc;
    if (found) {
        if ((rc = parse_int("nbc_chunk_bytes", v, 0, (long long)1 << 40, &x))) return rc;
        o->chunk_bytes = x;
    }
    if ((rc = info_get(info, "nbc_name", o->name, sizeof o->name, &found))) return rc;
    return MPI_SUCCESS;
}

int persistent_init(const call *c, MPI_Info info, nbc_request *request)
{
    if (!request) return nbc_fail(MPI_ERR_ARG, "%s: request is NULL", c->fn); /* MPICH's class */
    *request = NBC_REQUEST_NULL;
    init_options o;
    int rc = read_options(info, &o);
    struct nbc_req *r;
    if (rc == MPI_SUCCESS) rc = call_prepare(c, o.chunk_bytes, &r, NULL);
    if (rc != MPI_SUCCESS) return rc;
    if (o.any_order && (rc = comm_take_identity(r->cs, r)) != MPI_SUCCESS) {
        req_release(r);
        return rc;
    }
    r->persistent = 1;
    r->any_order = o.any_order;
    if (o.any_order) r->st.comm = MPI_COMM_NULL; /* its own duplicate, not the one a spare comes with */
    r->priority = r->next_priority = o.priority;
    memcpy(r->name, o.name, sizeof r->name);
    if (o.any_order) comm_add_any(r->cs, r);
    *request = r;
    return MPI_SUCCESS;
}

/* ---- start, free, priority ---- */

static int startable(struct nbc_req *r, const char *fn)
{
    if (!r) return nbc_fail(MPI_ERR_REQUEST, "%s: the request is NBC_REQUEST_NULL", fn);
    if (!r->persistent) return nbc_fail(MPI_ERR_REQUEST, "%s: the request is not persistent", fn);
    if (r->orphan) return nbc_fail(MPI_ERR_REQUEST, "%s: the request was made before nbc_finalize", fn);
    if (r->state != REQ_INACTIVE)
        return nbc_fail(MPI_ERR_REQUEST, "%s: the request is active (complete it with nbc_test or nbc_wait first)", fn);
    return MPI_SUCCESS;
}

static void start_one(struct nbc_req *r)
{
    r->priority = r->next_priority;
    call_launch(r);
}

int persistent_start(nbc_request *request)
{
    if (!request) return nbc_fail(MPI_ERR_ARG, "nbc_start: request is NULL");
    int rc = startable(*request, "nbc_start");
    if (rc == MPI_SUCCESS) start_one(*request);
    return rc;
}

/* Every request is checked before any starts: an error starts none. */
int persistent_startall(int count, nbc_request requests[])
{
    if (count < 0 || (count > 0 && !requests)) return nbc_fail(MPI_ERR_ARG, "nbc_startall: bad arguments");
    int rc = MPI_SUCCESS;
    for (int i = 0; i < count && rc == MPI_SUCCESS; i++) {
        rc = startable(requests[i], "nbc_startall");
        for (int j = 0; j < i && rc == MPI_SUCCESS; j++)
            if (requests[j] == requests[i]) rc = nbc_fail(MPI_ERR_REQUEST, "nbc_startall: request %d appears twice", i);
    }
    for (int i = 0; i < count && rc == MPI_SUCCESS; i++) start_one(requests[i]);
    return rc;
}

/* MPI makes freeing a collective request erroneous unless it is an inactive persistent one
 * (a request stays active until a test or wait has reported its completion): others are
 * refused and stay valid. */
int persistent_free(nbc_request *request)
{
    if (!request || !*request) return nbc_fail(MPI_ERR_REQUEST, "nbc_request_free: no request");
    int rc = MPI_SUCCESS;
    struct nbc_req *r = *request;
    if (r->state != REQ_INACTIVE && !r->orphan) {
        rc = nbc_fail(MPI_ERR_REQUEST, "nbc_request_free: the request is active (complete it with nbc_test or "
                      "nbc_wait first)%s", r->persistent ? "" : "; only persistent requests are freed this way");
    } else {
        req_release(r);
        *request = NBC_REQUEST_NULL;
    }
    return rc;
}

int persistent_set_priority(nbc_request request, int priority)
{
    if (!request) return nbc_fail(MPI_ERR_REQUEST, "nbc_set_priority: the request is NBC_REQUEST_NULL");
    int rc = MPI_SUCCESS;
    if (!request->persistent) rc = nbc_fail(MPI_ERR_REQUEST, "nbc_set_priority: the request is not persistent");
    else request->next_priority = priority;
    return rc;
}
