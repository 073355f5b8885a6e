/* nbc._fast: the common calls of the Python bindings (python/nbc/_core.py) in compiled code.
 *
 * What it does: iallreduce/allreduce, ibcast/bcast, ibarrier/barrier on C-contiguous NumPy
 * arrays and CPU torch tensors, and the requests (test, wait, start, free, startall, waitall),
 * with no Python between the call and nbc's C function. Anything it does not handle itself (an
 * argument to refuse, a dtype nbc has no MPI type for, a tensor on another device...) goes to
 * the ctypes function of _core.py, which checks it and raises the same error as before.
 *
 * What it does not do: link nbc or an MPI. _core.py loads libnbc.so through ctypes as before
 * (the one built against mpi4py's MPI: docs/python.md) and hands this module the addresses of
 * nbc's functions, MPI's handles for the dtypes and MPI_IN_PLACE; communicators and ops are
 * read from mpi4py's objects through mpi4py's C API (PyMPIComm_Get, PyMPIOp_Get, exported as
 * capsules). So one build serves both MPIs: handles are pointers in Open MPI and ints in MPICH,
 * and setup() says which. Built by the Makefile (`make`), for the python3 that has mpi4py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

typedef void *nbc_req; /* nbc.h: a pointer to struct nbc_req */

#if PY_VERSION_HEX >= 0x030D0000
#define FINALIZING() Py_IsFinalizing()
#else
#define FINALIZING() _Py_IsFinalizing()
#endif

/* nbc's functions, in the two MPIs' handle types: P (pointers, Open MPI) and I (ints, MPICH) */
typedef int (*iallreduce_P)(const void *, void *, int, void *, void *, void *, nbc_req *);
typedef int (*iallreduce_I)(const void *, void *, int, int, int, int, nbc_req *);
typedef int (*ibcast_P)(void *, int, void *, int, void *, nbc_req *);
typedef int (*ibcast_I)(void *, int, int, int, int, nbc_req *);
typedef int (*ibarrier_P)(void *, nbc_req *);
typedef int (*ibarrier_I)(int, nbc_req *);
typedef int (*req_fn)(nbc_req *);
typedef int (*test_fn)(nbc_req *, int *);
typedef int (*all_fn)(int, nbc_req *);
typedef int (*prio_fn)(nbc_req, int);

enum { D_F32, D_F64, D_I8, D_I16, D_I32, D_I64, D_U8, D_U16, D_U32, D_U64, D_BOOL, NTYPES };

static struct {
    int ready, int_handles;
    void *iallreduce, *ibcast, *ibarrier;
    req_fn wait, start, request_free;
    test_fn test;
    all_fn startall, waitall;
    prio_fn set_priority;
    intptr_t types[NTYPES], in_place;
    void *(*comm_get)(PyObject *); /* mpi4py's PyMPIComm_Get: a pointer to the handle */
    void *(*op_get)(PyObject *);
    PyTypeObject *ndarray, *tensor, *op_type;
    PyObject *in_place_obj, *comm_world, *op_sum; /* mpi4py's objects, the defaults */
    PyObject *torch_types;                         /* torch.dtype -> index in types[] */
    PyObject *check, *error, *on_drop; /* _core's: raise Error(rc), Error(MPI_ERR_REQUEST, msg), a dropped request */
    PyObject *slow[6];                             /* _core's ctypes functions, in call order */
    PyObject *s_is_cpu, *s_is_contiguous, *s_dtype, *s_data_ptr, *s_numel;
} g;

enum { S_IALLREDUCE, S_ALLREDUCE, S_IBCAST, S_BCAST, S_IBARRIER, S_BARRIER };

/* Big buffers: the call may reduce a while, so other Python threads get the GIL meanwhile. */
#define GIL_BYTES 32768

static intptr_t handle_of(void *p) { return g.int_handles ? (intptr_t) * (int *)p : (intptr_t) * (void **)p; }

/* raises _core's Error for a failed nbc call (its message read from nbc) */
static PyObject *fail(int rc)
{
    PyObject *r = PyObject_CallFunction(g.check, "i", rc);
    Py_XDECREF(r);
    return NULL;
}

/* ---- buffers ---- */

typedef struct {
    void *addr;
    Py_ssize_t count, nbytes;
    int type;
} buf_t;

static int format_type(const char *f, Py_ssize_t size)
{
    if (*f == '@' || *f == '=')
        f++;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    else if (*f == '<')
        f++;
#endif
    if (!f[0] || f[1])
        return -1;
    switch (f[0]) {
    case 'f': return size == 4 ? D_F32 : -1;
    case 'd': return size == 8 ? D_F64 : -1;
    case '?': return size == 1 ? D_BOOL : -1;
    case 'b': return size == 1 ? D_I8 : -1;
    case 'B': return size == 1 ? D_U8 : -1;
    case 'h': return size == 2 ? D_I16 : -1;
    case 'H': return size == 2 ? D_U16 : -1;
    case 'i': case 'l': case 'q': return size == 4 ? D_I32 : size == 8 ? D_I64 : -1;
    case 'I': case 'L': case 'Q': return size == 4 ? D_U32 : size == 8 ? D_U64 : -1;
    }
    return -1;
}

static PyObject *call0(PyObject *o, PyObject *name) { return PyObject_CallMethodNoArgs(o, name); }

/* 1: b is filled; 0: not for this module (the ctypes path decides, and raises if it must);
 * -1: an exception is set */
static int get_buf(PyObject *o, int writable, buf_t *b)
{
    if (g.ndarray && Py_IS_TYPE(o, g.ndarray)) {
        Py_buffer v;
        if (PyObject_GetBuffer(o, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
            PyErr_Clear();
            return 0;
        }
        int t = v.itemsize > 0 && v.format ? format_type(v.format, v.itemsize) : -1;
        b->addr = v.buf;
        b->nbytes = v.len;
        b->count = t < 0 ? 0 : v.len / v.itemsize;
        b->type = t;
        PyBuffer_Release(&v);
        return t >= 0 && b->count <= INT_MAX;
    }
    if (g.tensor && PyObject_TypeCheck(o, g.tensor)) {
        PyObject *x = PyObject_GetAttr(o, g.s_is_cpu);
        if (!x)
            return -1;
        int ok = x == Py_True;
        Py_DECREF(x);
        if (!ok)
            return 0;
        if (!(x = call0(o, g.s_is_contiguous)))
            return -1;
        ok = x == Py_True;
        Py_DECREF(x);
        if (!ok)
            return 0;
        if (!(x = PyObject_GetAttr(o, g.s_dtype)))
            return -1;
        PyObject *t = PyDict_GetItemWithError(g.torch_types, x);
        Py_DECREF(x);
        if (!t)
            return PyErr_Occurred() ? -1 : 0;
        b->type = (int)PyLong_AsLong(t);
        if (!(x = call0(o, g.s_data_ptr)))
            return -1;
        b->addr = PyLong_AsVoidPtr(x);
        Py_DECREF(x);
        if (!(x = call0(o, g.s_numel)))
            return -1;
        b->count = PyLong_AsSsize_t(x);
        Py_DECREF(x);
        if (PyErr_Occurred())
            return -1;
        static const int size[NTYPES] = {4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1};
        b->nbytes = b->count * size[b->type];
        return b->count <= INT_MAX;
    }
    return 0;
}

/* ---- arguments: fast calls with keywords ---- */

/* Fills out[0..n) from positional and keyword arguments (NULL where not given); 0 when they do
 * not fit the names (the ctypes function then raises Python's usual TypeError). */
static int parse(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *const *names, int n,
                 PyObject **out)
{
    if (nargs > n)
        return 0;
    for (int i = 0; i < n; i++)
        out[i] = i < nargs ? args[i] : NULL;
    if (!kwnames)
        return 1;
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(key, names[i]) != 0)
            i++;
        if (i == n || out[i])
            return 0;
        out[i] = args[nargs + k];
    }
    return 1;
}

static PyObject *slow(int which, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return PyObject_Vectorcall(g.slow[which], args, nargs, kwnames);
}

static int comm_handle(PyObject *comm, intptr_t *h)
{
    void *p = g.comm_get(comm);
    if (!p) {
        PyErr_Clear();
        return 0;
    }
    *h = handle_of(p);
    return 1;
}

/* ---- requests ---- */

typedef struct {
    PyObject_HEAD
    nbc_req handle;
    PyObject *keep; /* the buffers, kept alive while the request may use them */
    PyObject *name;
    Py_ssize_t nbytes;
    char active, persistent;
} Req;

static PyTypeObject ReqType;

static PyObject *new_req(nbc_req h, PyObject *keep, int persistent, PyObject *name, Py_ssize_t nbytes)
{
    Req *r = PyObject_New(Req, &ReqType);
    if (!r)
        return NULL;
    r->handle = h;
    Py_XINCREF(keep);
    r->keep = keep;
    Py_XINCREF(name);
    r->name = name;
    r->nbytes = nbytes;
    r->persistent = (char)persistent;
    r->active = !persistent;
    return (PyObject *)r;
}

static void req_done(Req *r)
{
    r->active = 0;
    if (!r->persistent)
        Py_CLEAR(r->keep);
}

static void req_dealloc(Req *r)
{
    /* dropped while active (kept, buffers and all, until progress() sees it complete) or a
     * persistent request never freed: _core decides, as the ctypes path's __del__ did */
    if (r->handle && (r->active || r->persistent) && g.on_drop && !FINALIZING()) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *res = PyObject_CallFunction(g.on_drop, "KOiiOn", (unsigned long long)(uintptr_t)r->handle,
                                              r->keep ? r->keep : Py_None, r->persistent, r->active,
                                              r->name ? r->name : Py_None, r->nbytes);
        if (res)
            Py_DECREF(res);
        else
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(r->keep);
    Py_XDECREF(r->name);
    PyObject_Free(r);
}

static PyObject *req_test(Req *r, PyObject *unused)
{
    (void)unused;
    if (!r->handle || !r->active)
        Py_RETURN_TRUE;
    int flag = 0, rc;
    if (r->nbytes >= GIL_BYTES) {
        nbc_req h = r->handle;
        Py_BEGIN_ALLOW_THREADS
        rc = g.test(&h, &flag);
        Py_END_ALLOW_THREADS
        r->handle = h;
    } else {
        rc = g.test(&r->handle, &flag);
    }
    if (flag || rc)
        req_done(r);
    if (rc)
        return fail(rc);
    return PyBool_FromLong(flag);
}

static int wait_handle(nbc_req *hp)
{
    int rc;
    nbc_req h = *hp;
    Py_BEGIN_ALLOW_THREADS
    rc = g.wait(&h);
    Py_END_ALLOW_THREADS
    *hp = h;
    return rc;
}

static PyObject *req_wait(Req *r, PyObject *unused)
{
    (void)unused;
    if (!r->handle || !r->active)
        Py_RETURN_NONE;
    int rc = wait_handle(&r->handle);
    req_done(r);
    if (rc)
        return fail(rc);
    Py_RETURN_NONE;
}

static PyObject *req_start(Req *r, PyObject *unused)
{
    (void)unused;
    if (!r->persistent)
        return PyObject_CallFunction(g.error, "s", "start: not a persistent request");
    int rc;
    if (r->nbytes >= GIL_BYTES) {
        nbc_req h = r->handle;
        Py_BEGIN_ALLOW_THREADS
        rc = g.start(&h);
        Py_END_ALLOW_THREADS
        r->handle = h;
    } else {
        rc = g.start(&r->handle);
    }
    if (rc)
        return fail(rc);
    r->active = 1;
    Py_RETURN_NONE;
}

static PyObject *req_set_priority(Req *r, PyObject *arg)
{
    long p = PyLong_AsLong(arg);
    if (p == -1 && PyErr_Occurred())
        return NULL;
    int rc = g.set_priority(r->handle, (int)p);
    return rc ? fail(rc) : Py_NewRef(Py_None);
}

static PyObject *req_free(Req *r, PyObject *unused)
{
    (void)unused;
    if (!r->handle)
        Py_RETURN_NONE;
    if (r->active) {
        int rc = wait_handle(&r->handle);
        req_done(r);
        if (rc)
            return fail(rc);
    }
    if (r->persistent && r->handle) {
        int rc = g.request_free(&r->handle);
        if (rc)
            return fail(rc);
    }
    r->handle = NULL;
    Py_CLEAR(r->keep);
    Py_RETURN_NONE;
}

static PyObject *req_enter(PyObject *r, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(r);
}

static PyObject *req_exit(Req *r, PyObject *args)
{
    (void)args;
    return req_free(r, NULL);
}

static PyObject *req_get_active(Req *r, void *unused)
{
    (void)unused;
    return PyBool_FromLong(r->active);
}

static PyObject *req_get_handle(Req *r, void *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(r->handle);
}

static PyMethodDef req_methods[] = {
    {"test", (PyCFunction)req_test, METH_NOARGS,
     "Advances every active request; True when this one has completed (or is inactive)."},
    {"wait", (PyCFunction)req_wait, METH_NOARGS, "Completes the request (the GIL is released while nbc waits)."},
    {"start", (PyCFunction)req_start, METH_NOARGS, "Starts a persistent request (inactive; its buffers must not move)."},
    {"set_priority", (PyCFunction)req_set_priority, METH_O,
     "Changes a persistent request's priority, from its next start on (higher runs first)."},
    {"free", (PyCFunction)req_free, METH_NOARGS, "Releases the request; an active one is waited for first."},
    {"__enter__", req_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)req_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyMemberDef req_members[] = {
    {"persistent", T_BOOL, offsetof(Req, persistent), READONLY, "a persistent request (started many times)"},
    {"name", T_OBJECT, offsetof(Req, name), READONLY, "nbc_name, for a persistent request"},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef req_getset[] = {
    {"active", (getter)req_get_active, NULL,
     "True between a start (or a non-blocking call) and the test/wait that completes it.", NULL},
    {"handle", (getter)req_get_handle, NULL, "nbc's request, as an address (0 once freed or completed)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ReqType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nbc.Request",
    .tp_basicsize = sizeof(Req),
    .tp_dealloc = (destructor)req_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One collective: test() / wait(); a persistent one also start(), set_priority(), free().\n"
              "It keeps its buffers alive while they may be in use.",
    .tp_methods = req_methods,
    .tp_members = req_members,
    .tp_getset = req_getset,
};

/* ---- the collectives ---- */

static PyObject *allreduce(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int blocking)
{
    static const char *const names[] = {"sendbuf", "recvbuf", "op", "comm"};
    PyObject *a[4];
    int which = blocking ? S_ALLREDUCE : S_IALLREDUCE;
    if (!parse(args, nargs, kwnames, names, 4, a) || !a[0] || !a[1])
        return slow(which, args, nargs, kwnames);
    PyObject *op = a[2] ? a[2] : g.op_sum, *comm = a[3] ? a[3] : g.comm_world;
    buf_t rb, sb;
    int k = get_buf(a[1], 1, &rb);
    if (k <= 0)
        return k < 0 ? NULL : slow(which, args, nargs, kwnames);
    const void *send = (const void *)g.in_place;
    if (a[0] != g.in_place_obj && a[0] != Py_None) {
        if ((k = get_buf(a[0], 0, &sb)) <= 0)
            return k < 0 ? NULL : slow(which, args, nargs, kwnames);
        if (sb.type != rb.type || sb.count != rb.count)
            return slow(which, args, nargs, kwnames);
        send = sb.addr;
    }
    intptr_t c, o;
    if (!PyObject_TypeCheck(op, g.op_type) || !comm_handle(comm, &c))
        return slow(which, args, nargs, kwnames);
    o = handle_of(g.op_get(op));
    intptr_t t = g.types[rb.type];
    nbc_req h = NULL;
    int rc;
    if (rb.nbytes >= GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        rc = g.int_handles
                 ? ((iallreduce_I)g.iallreduce)(send, rb.addr, (int)rb.count, (int)t, (int)o, (int)c, &h)
                 : ((iallreduce_P)g.iallreduce)(send, rb.addr, (int)rb.count, (void *)t, (void *)o, (void *)c, &h);
        Py_END_ALLOW_THREADS
    } else {
        rc = g.int_handles
                 ? ((iallreduce_I)g.iallreduce)(send, rb.addr, (int)rb.count, (int)t, (int)o, (int)c, &h)
                 : ((iallreduce_P)g.iallreduce)(send, rb.addr, (int)rb.count, (void *)t, (void *)o, (void *)c, &h);
    }
    if (rc)
        return fail(rc);
    if (blocking) {
        if ((rc = wait_handle(&h)))
            return fail(rc);
        return Py_NewRef(a[1]);
    }
    PyObject *keep = PyTuple_Pack(2, a[0], a[1]);
    if (!keep)
        return NULL; /* cannot happen short of memory; the request is then lost */
    PyObject *r = new_req(h, keep, 0, NULL, rb.nbytes);
    Py_DECREF(keep);
    return r;
}

static PyObject *bcast(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int blocking)
{
    static const char *const names[] = {"buf", "root", "comm"};
    PyObject *a[3];
    int which = blocking ? S_BCAST : S_IBCAST;
    if (!parse(args, nargs, kwnames, names, 3, a) || !a[0])
        return slow(which, args, nargs, kwnames);
    PyObject *comm = a[2] ? a[2] : g.comm_world;
    long root = 0;
    if (a[1]) {
        if (!PyLong_CheckExact(a[1]))
            return slow(which, args, nargs, kwnames);
        root = PyLong_AsLong(a[1]);
        if ((root == -1 && PyErr_Occurred()) || root < INT_MIN || root > INT_MAX) {
            PyErr_Clear();
            return slow(which, args, nargs, kwnames);
        }
    }
    buf_t b;
    intptr_t c;
    int k = get_buf(a[0], 1, &b);
    if (k <= 0)
        return k < 0 ? NULL : slow(which, args, nargs, kwnames);
    if (!comm_handle(comm, &c))
        return slow(which, args, nargs, kwnames);
    intptr_t t = g.types[b.type];
    nbc_req h = NULL;
    int rc = g.int_handles ? ((ibcast_I)g.ibcast)(b.addr, (int)b.count, (int)t, (int)root, (int)c, &h)
                           : ((ibcast_P)g.ibcast)(b.addr, (int)b.count, (void *)t, (int)root, (void *)c, &h);
    if (rc)
        return fail(rc);
    if (blocking) {
        if ((rc = wait_handle(&h)))
            return fail(rc);
        return Py_NewRef(a[0]);
    }
    PyObject *keep = PyTuple_Pack(1, a[0]);
    if (!keep)
        return NULL;
    PyObject *r = new_req(h, keep, 0, NULL, b.nbytes);
    Py_DECREF(keep);
    return r;
}

static PyObject *barrier(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int blocking)
{
    static const char *const names[] = {"comm"};
    PyObject *a[1];
    intptr_t c;
    int which = blocking ? S_BARRIER : S_IBARRIER;
    if (!parse(args, nargs, kwnames, names, 1, a) || !comm_handle(a[0] ? a[0] : g.comm_world, &c))
        return slow(which, args, nargs, kwnames);
    nbc_req h = NULL;
    int rc = g.int_handles ? ((ibarrier_I)g.ibarrier)((int)c, &h) : ((ibarrier_P)g.ibarrier)((void *)c, &h);
    if (rc)
        return fail(rc);
    if (blocking) {
        if ((rc = wait_handle(&h)))
            return fail(rc);
        Py_RETURN_NONE;
    }
    PyObject *keep = PyTuple_New(0);
    PyObject *r = keep ? new_req(h, keep, 0, NULL, 0) : NULL;
    Py_XDECREF(keep);
    return r;
}

#define ENTRY(name, impl, blocking)                                                                  \
    static PyObject *name(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                                                \
        (void)m;                                                                                     \
        return impl(args, nargs, kwnames, blocking);                                                 \
    }
ENTRY(f_iallreduce, allreduce, 0)
ENTRY(f_allreduce, allreduce, 1)
ENTRY(f_ibcast, bcast, 0)
ENTRY(f_bcast, bcast, 1)
ENTRY(f_ibarrier, barrier, 0)
ENTRY(f_barrier, barrier, 1)

/* ---- many requests ---- */

static PyObject *f_startall(PyObject *m, PyObject *arg)
{
    (void)m;
    PyObject *seq = PySequence_Fast(arg, "startall: a sequence of requests");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    nbc_req *h = PyMem_Malloc((n ? n : 1) * sizeof *h);
    PyObject *res = NULL;
    if (!h) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!Py_IS_TYPE(items[i], &ReqType) || !((Req *)items[i])->persistent) {
            res = PyObject_CallFunction(g.error, "s", "startall: not a persistent request");
            goto out;
        }
        h[i] = ((Req *)items[i])->handle;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = g.startall((int)n, h);
    Py_END_ALLOW_THREADS
    if (rc) {
        res = fail(rc);
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        ((Req *)items[i])->handle = h[i];
        ((Req *)items[i])->active = 1;
    }
    res = Py_NewRef(Py_None);
out:
    PyMem_Free(h);
    Py_DECREF(seq);
    return res;
}

static PyObject *f_waitall(PyObject *m, PyObject *arg)
{
    (void)m;
    PyObject *seq = PySequence_Fast(arg, "waitall: a sequence of requests");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), k = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    nbc_req *h = PyMem_Malloc((n ? n : 1) * sizeof *h);
    Req **rs = PyMem_Malloc((n ? n : 1) * sizeof *rs);
    PyObject *res = NULL;
    if (!h || !rs) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!Py_IS_TYPE(items[i], &ReqType)) {
            PyErr_SetString(PyExc_TypeError, "waitall: not an nbc.Request");
            goto out;
        }
        Req *r = (Req *)items[i];
        if (r->active && r->handle) {
            rs[k] = r;
            h[k++] = r->handle;
        }
    }
    int rc = 0;
    if (k) {
        Py_BEGIN_ALLOW_THREADS
        rc = g.waitall((int)k, h);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        rs[i]->handle = h[i];
        req_done(rs[i]);
    }
    res = rc ? fail(rc) : Py_NewRef(Py_None);
out:
    PyMem_Free(h);
    PyMem_Free(rs);
    Py_DECREF(seq);
    return res;
}

/* wrap(handle, keep, persistent, name, nbytes[, active]): a Request over a handle the ctypes
 * path made (the other collectives, the persistent ones, orphans) */
static PyObject *f_wrap(PyObject *m, PyObject *args)
{
    (void)m;
    unsigned long long h;
    PyObject *keep, *name;
    int persistent, active = -1;
    Py_ssize_t nbytes;
    if (!PyArg_ParseTuple(args, "KOpOn|p", &h, &keep, &persistent, &name, &nbytes, &active))
        return NULL;
    PyObject *r = new_req((nbc_req)(uintptr_t)h, keep, persistent, name == Py_None ? NULL : name, nbytes);
    if (r && active >= 0)
        ((Req *)r)->active = (char)active;
    return r;
}

static void *fn(PyObject *d, const char *key)
{
    PyObject *v = PyDict_GetItemString(d, key);
    void *p = v ? PyLong_AsVoidPtr(v) : NULL;
    if (!p && !PyErr_Occurred())
        PyErr_Format(PyExc_KeyError, "_fast.setup: no %s", key);
    return p;
}

static void *capi(PyObject *mpi, const char *name, const char *sig)
{
    PyObject *d = PyObject_GetAttrString(mpi, "__pyx_capi__");
    if (!d)
        return NULL;
    PyObject *cap = PyDict_GetItemString(d, name);
    void *p = cap ? PyCapsule_GetPointer(cap, sig) : NULL;
    Py_DECREF(d);
    if (!p && !PyErr_Occurred())
        PyErr_Format(PyExc_ImportError, "mpi4py exports no %s", name);
    return p;
}

/* setup(d): d holds the functions' addresses ("nbc_iallreduce": int...), "int_handles", "types"
 * (11 handles, in the order of the enum above), "in_place" (the address), "MPI" (mpi4py.MPI),
 * "ndarray", "check", "error", "on_drop" and "slow" (6 functions) */
static PyObject *f_setup(PyObject *m, PyObject *d)
{
    (void)m;
    if (!PyDict_Check(d))
        return PyErr_Format(PyExc_TypeError, "_fast.setup: a dict");
    g.iallreduce = fn(d, "nbc_iallreduce");
    g.ibcast = fn(d, "nbc_ibcast");
    g.ibarrier = fn(d, "nbc_ibarrier");
    g.wait = (req_fn)fn(d, "nbc_wait");
    g.start = (req_fn)fn(d, "nbc_start");
    g.request_free = (req_fn)fn(d, "nbc_request_free");
    g.test = (test_fn)fn(d, "nbc_test");
    g.startall = (all_fn)fn(d, "nbc_startall");
    g.waitall = (all_fn)fn(d, "nbc_waitall");
    g.set_priority = (prio_fn)fn(d, "nbc_set_priority");
    if (PyErr_Occurred())
        return NULL;
    PyObject *ih = PyDict_GetItemString(d, "int_handles"), *types = PyDict_GetItemString(d, "types");
    PyObject *ip = PyDict_GetItemString(d, "in_place"), *mpi = PyDict_GetItemString(d, "MPI");
    PyObject *slows = PyDict_GetItemString(d, "slow");
    if (!ih || !types || !ip || !mpi || !slows || !PyTuple_Check(types) || PyTuple_GET_SIZE(types) != NTYPES ||
        !PyTuple_Check(slows) || PyTuple_GET_SIZE(slows) != 6)
        return PyErr_Format(PyExc_KeyError, "_fast.setup: incomplete");
    g.int_handles = PyObject_IsTrue(ih);
    for (int i = 0; i < NTYPES; i++)
        g.types[i] = (intptr_t)PyLong_AsSsize_t(PyTuple_GET_ITEM(types, i));
    g.in_place = (intptr_t)PyLong_AsSsize_t(ip);
    if (PyErr_Occurred())
        return NULL;
    g.comm_get = (void *(*)(PyObject *))capi(mpi, "PyMPIComm_Get", "MPI_Comm *(PyObject *)");
    g.op_get = (void *(*)(PyObject *))capi(mpi, "PyMPIOp_Get", "MPI_Op *(PyObject *)");
    if (!g.comm_get || !g.op_get)
        return NULL;
#define OBJ(field, get)                        \
    do {                                       \
        PyObject *v_ = get;                    \
        if (!v_)                               \
            goto bad;                          \
        Py_XSETREF(g.field, (void *)v_);       \
    } while (0)
    OBJ(op_type, PyObject_GetAttrString(mpi, "Op"));
    OBJ(in_place_obj, PyObject_GetAttrString(mpi, "IN_PLACE"));
    OBJ(comm_world, PyObject_GetAttrString(mpi, "COMM_WORLD"));
    OBJ(op_sum, PyObject_GetAttrString(mpi, "SUM"));
    OBJ(ndarray, Py_XNewRef(PyDict_GetItemString(d, "ndarray")));
    OBJ(check, Py_XNewRef(PyDict_GetItemString(d, "check")));
    OBJ(error, Py_XNewRef(PyDict_GetItemString(d, "error")));
    OBJ(on_drop, Py_XNewRef(PyDict_GetItemString(d, "on_drop")));
    for (int i = 0; i < 6; i++)
        OBJ(slow[i], Py_NewRef(PyTuple_GET_ITEM(slows, i)));
    if (!PyType_Check(g.op_type) || !PyType_Check(g.ndarray))
        return PyErr_Format(PyExc_TypeError, "_fast.setup: MPI.Op and ndarray must be types");
    g.ready = 1;
    Py_RETURN_NONE;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_KeyError, "_fast.setup: incomplete");
    return NULL;
}

/* set_torch(torch.Tensor, {torch.dtype: index}): tensors from then on take the compiled path */
static PyObject *f_set_torch(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *t, *d;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &t, &PyDict_Type, &d))
        return NULL;
    Py_XSETREF(g.torch_types, Py_NewRef(d));
    Py_XSETREF(g.tensor, (PyTypeObject *)Py_NewRef(t));
    Py_RETURN_NONE;
}

#define FAST (PyCFunction)(void (*)(void))
static PyMethodDef methods[] = {
    {"iallreduce", FAST f_iallreduce, METH_FASTCALL | METH_KEYWORDS,
     "iallreduce(sendbuf, recvbuf, op=SUM, comm=COMM_WORLD): like MPI_Iallreduce"},
    {"allreduce", FAST f_allreduce, METH_FASTCALL | METH_KEYWORDS,
     "allreduce(sendbuf, recvbuf, op=SUM, comm=COMM_WORLD): iallreduce, then wait; returns recvbuf"},
    {"ibcast", FAST f_ibcast, METH_FASTCALL | METH_KEYWORDS, "ibcast(buf, root=0, comm=COMM_WORLD)"},
    {"bcast", FAST f_bcast, METH_FASTCALL | METH_KEYWORDS, "bcast(buf, root=0, comm=COMM_WORLD): returns buf"},
    {"ibarrier", FAST f_ibarrier, METH_FASTCALL | METH_KEYWORDS, "ibarrier(comm=COMM_WORLD)"},
    {"barrier", FAST f_barrier, METH_FASTCALL | METH_KEYWORDS, "barrier(comm=COMM_WORLD)"},
    {"startall", f_startall, METH_O, "Starts persistent requests (nbc_startall)."},
    {"waitall", f_waitall, METH_O, "Completes every request (nbc_waitall)."},
    {"wrap", f_wrap, METH_VARARGS, NULL},
    {"setup", f_setup, METH_O, NULL},
    {"set_torch", f_set_torch, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "nbc._fast",
                                    "nbc's common calls, compiled (see python/nbc/_fast.c)", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void)
{
    if (PyType_Ready(&ReqType) < 0)
        return NULL;
    g.s_is_cpu = PyUnicode_InternFromString("is_cpu");
    g.s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    g.s_dtype = PyUnicode_InternFromString("dtype");
    g.s_data_ptr = PyUnicode_InternFromString("data_ptr");
    g.s_numel = PyUnicode_InternFromString("numel");
    if (!g.s_is_cpu || !g.s_is_contiguous || !g.s_dtype || !g.s_data_ptr || !g.s_numel)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ReqType);
    if (PyModule_AddObject(m, "Request", (PyObject *)&ReqType) < 0) {
        Py_DECREF(&ReqType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
