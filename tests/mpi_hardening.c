/* Hostile input through the library: schedules at the 64-bit limits run on buffers with guard
 * zones (the call must fail and leave the guards alone), a racing schedule the verifier must
 * refuse, endless and oversized files as schedules and tuning files, rule numbers out of
 * range, the instruction bound and a NULL collective.
 * Run as `mpiexec -n P ./mpi_hardening` from the repository's top directory; prints ok/FAIL
 * lines from rank 0. With --init-error VAR it only checks that the first call fails naming
 * VAR (run it with a bad VAR in the environment). With --trace it runs a few allreduces for
 * NBC_TRACE's check (tests/run.sh reads what it prints). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbc.h"

static int rank, size, failures;

/* Every rank makes each check; rank 0 reports whether it held on all of them. */
static void check(int ok, const char *name, const char *fmt, ...)
{
    char why[300] = "";
    if (!ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
    }
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all) printf("ok %s\n", name);
        else printf("FAIL %s: %s\n", name, ok ? "on another rank" : why);
    }
    failures += !all;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fputs(text, f);
    fclose(f);
}

enum { GUARD = 64, COUNT = 4 };

/* Forces schedule `name` from `text` and runs one allreduce of COUNT ints whose buffers sit
 * between guard zones. Returns the call's status; *guards_ok tells whether the guards and the
 * send buffer are as they were. */
static int guarded_allreduce(const char *name, const char *text, int *guards_ok)
{
    char path[64];
    snprintf(path, sizeof path, "hostile-%d.nbs", rank);
    write_file(path, text);
    int rc = nbc_load_schedules(path);
    unlink(path);
    if (rc == MPI_SUCCESS) rc = nbc_set_schedule("allreduce", name);
    unsigned char send[GUARD + COUNT * sizeof(int) + GUARD], recv[sizeof send], want[sizeof send];
    memset(send, 0xa5, sizeof send);
    memset(recv, 0x5a, sizeof recv);
    memcpy(want, recv, sizeof recv);
    if (rc == MPI_SUCCESS) {
        nbc_request r;
        rc = nbc_iallreduce(send + GUARD, recv + GUARD, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    }
    *guards_ok = 1;
    for (size_t i = 0; i < sizeof send; i++) {
        int in_guard = i < GUARD || i >= GUARD + COUNT * sizeof(int);
        if (send[i] != 0xa5 || (in_guard && recv[i] != want[i])) *guards_ok = 0;
    }
    nbc_set_schedule("allreduce", NULL);
    return rc;
}

static void hostile_schedules(void)
{
    static const struct {
        const char *what, *name, *text, *message;
    } cases[] = {
        {"an index of INT64_MAX", "hostile_index",
         "schedule hostile_index implements allreduce\n{\n    let big = 9223372036854775807;\n"
         "    round { recv recvbuf[big] from rank; send sendbuf[0] to rank; }\n}\n",
         "is outside 'recvbuf'"},
        {"an index of INT64_MAX in scratch", "hostile_scratch",
         "schedule hostile_scratch implements allreduce\n{\n    scratch t[count];\n"
         "    round { recv t[9223372036854775807] from rank; send sendbuf[0] to rank; }\n}\n",
         "is outside 't'"},
        {"a slice ending past INT64_MAX", "hostile_slice",
         "schedule hostile_slice implements allreduce\n{\n    let big = 9223372036854775807;\n"
         "    round { recv recvbuf[big - 1 : big + 1] from rank; send sendbuf[0] to rank; }\n}\n",
         "integer overflow"},
        {"a count from len() of a range wider than INT64_MAX", "hostile_len",
         "schedule hostile_len implements allreduce\n{\n    let m = -9223372036854775807 - 1;\n"
         "    let n = len(range(m, 9223372036854775807));\n"
         "    round { recv recvbuf[0 : n + 2] from rank; send sendbuf[0] to rank; }\n}\n",
         "integer overflow"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int guards_ok, rc = guarded_allreduce(cases[i].name, cases[i].text, &guards_ok);
        char name[160];
        snprintf(name, sizeof name, "%s: the call fails, the guard zones are untouched", cases[i].what);
        check(rc != MPI_SUCCESS && guards_ok && strstr(nbc_error_message(), cases[i].message), name,
              "rc %d, guards %s: %s", rc, guards_ok ? "intact" : "OVERWRITTEN", nbc_error_message());
    }

    /* the compiler lets a race within a round pass; the verifier on the run-time path does not */
    int guards_ok, rc = guarded_allreduce("racing",
                                          "schedule racing implements allreduce\nrequires count >= 1\n{\n"
                                          "    round { send recvbuf[0] to rank; recv recvbuf[0] from rank; }\n}\n",
                                          &guards_ok);
    check(rc == MPI_ERR_ARG && strstr(nbc_error_message(), "fails verification") && strstr(nbc_error_message(), "race"),
          "the verifier refuses a program that races within a round (MPI_ERR_ARG)", "rc %d: %s", rc, nbc_error_message());

    /* a program past the instruction bound (NBC_MAX_INSNS=1000, set before the first call) */
    rc = guarded_allreduce("sprawling",
                           "schedule sprawling implements allreduce\nrequires count >= 1\n{\n"
                           "    for i in 0 .. 2000 { round { send recvbuf[0] to rank; recv recvbuf[1] from rank; } }\n}\n",
                           &guards_ok);
    check(rc != MPI_SUCCESS && strstr(nbc_error_message(), "more than 1000 instructions") &&
              strstr(nbc_error_message(), "NBC_MAX_INSNS"),
          "a program past NBC_MAX_INSNS fails, naming the limit", "rc %d: %s", rc, nbc_error_message());
}

static void files(void)
{
    char big[64], rules[64];
    snprintf(big, sizeof big, "big-%d.nbs", rank);
    snprintf(rules, sizeof rules, "extreme-%d.rules", rank);
    /* a sparse file over 2 GiB: its size is read, its bytes are not */
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int made = fd >= 0 && ftruncate(fd, (off_t)3 << 30) == 0;
    if (fd >= 0) close(fd);
    const char *paths[] = {"/dev/zero", "/dev/urandom", big};
    for (int i = 0; i < 3; i++) {
        char name[160];
        int rc = nbc_load_schedules(paths[i]);
        snprintf(name, sizeof name, "nbc_load_schedules(%s) fails on the size limit", i == 2 ? "a sparse 3 GiB file" : paths[i]);
        check(made && rc == MPI_ERR_ARG && strstr(nbc_error_message(), "16 MiB"), name, "rc %d: %s", rc, nbc_error_message());
        rc = nbc_load_tuning(paths[i]);
        snprintf(name, sizeof name, "nbc_load_tuning(%s) fails on the size limit", i == 2 ? "a sparse 3 GiB file" : paths[i]);
        check(made && rc == MPI_ERR_ARG && strstr(nbc_error_message(), "16 MiB"), name, "rc %d: %s", rc, nbc_error_message());
    }
    unlink(big);

    static const char *const extreme[] = {"allreduce p <= 9223372036854775807 -> linear\n",
                                          "allreduce bytes > 9223372036854775807 -> linear\n",
                                          "allreduce p < -1 -> linear\n",
                                          "allreduce bytes >= 99999999999999999999 -> linear\n"};
    for (int i = 0; i < 4; i++) {
        write_file(rules, extreme[i]);
        int rc = nbc_load_tuning(rules);
        char want[96], name[160];
        snprintf(want, sizeof want, "%s:1: ", rules); /* the library says it in one line, "error: " left out */
        snprintf(name, sizeof name, "a tuning file with '%.*s' is refused with file:line",
                 (int)(strstr(extreme[i], " ->") - extreme[i]), extreme[i]);
        check(rc == MPI_ERR_ARG && strstr(nbc_error_message(), want) && strstr(nbc_error_message(), "outside"), name,
              "rc %d: %s", rc, nbc_error_message());
    }
    unlink(rules);

    int rc = nbc_set_schedule(NULL, "ring");
    check(rc == MPI_ERR_ARG && strstr(nbc_error_message(), "no collective named") && !strstr(nbc_error_message(), "(null)"),
          "nbc_set_schedule(NULL, ...) says no collective is named", "rc %d: %s", rc, nbc_error_message());
}

/* Two persistent requests fail at run time, each with its own message (nbc_request_error),
 * while nbc_error_message keeps only the last one reported. Their schedule sends two elements
 * where the receiver expects one: MPI reports the truncation, through MPI_COMM_WORLD's error
 * handler in MPICH, so that one returns errors for the while. */
static void request_errors(void)
{
    char path[64];
    snprintf(path, sizeof path, "truncating-%d.nbs", rank);
    write_file(path, "schedule truncating implements allreduce\nrequires count >= 2\n{\n"
                     "    round { send sendbuf[0 : 2] to (rank + 1) % p; recv recvbuf[0] from (rank - 1) % p; }\n}\n");
    int rc = nbc_load_schedules(path);
    unlink(path);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int in[2][COUNT] = {{0}}, out[2][COUNT];
    nbc_request r[2] = {NBC_REQUEST_NULL, NBC_REQUEST_NULL};
    for (int i = 0; i < 2 && rc == MPI_SUCCESS; i++) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "nbc_name", i ? "second" : "first");
        rc = nbc_set_schedule("allreduce", "truncating");
        if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(in[i], out[i], COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, &r[i]);
        MPI_Info_free(&info);
    }
    nbc_set_schedule("allreduce", NULL);
    int fresh = rc == MPI_SUCCESS && !*nbc_request_error(r[0]) && !*nbc_request_error(r[1]);
    if (rc == MPI_SUCCESS) rc = nbc_startall(2, r);
    int wait_rc = rc == MPI_SUCCESS ? nbc_waitall(2, r) : rc;
    const char *e0 = nbc_request_error(r[0]), *e1 = nbc_request_error(r[1]);
    check(rc == MPI_SUCCESS && wait_rc != MPI_SUCCESS && fresh && strstr(e0, "request 'first'") && strstr(e0, "truncating") &&
              strstr(e0, "round 0") && strstr(e1, "request 'second'") && strstr(nbc_error_message(), "request '"),
          "two failed requests each keep their own message (nbc_request_error)", "rc %d, wait %d, fresh %d: '%s' / '%s' / last '%s'", rc,
          wait_rc, fresh, e0, e1, nbc_error_message());
    check(!*nbc_request_error(NBC_REQUEST_NULL), "nbc_request_error(NBC_REQUEST_NULL) is empty", "'%s'", nbc_request_error(NBC_REQUEST_NULL));
    for (int i = 0; i < 2; i++) nbc_request_free(&r[i]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* NBC_TRACE: three calls of one shape and one of another, each program traced once. */
static int trace_run(void)
{
    int in[16] = {0}, out[16];
    int rc = nbc_set_schedule("allreduce", "ring");
    for (int i = 0; i < 4 && rc == MPI_SUCCESS; i++) {
        nbc_request r;
        rc = nbc_iallreduce(in, out, i < 3 ? 8 : 16, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    }
    check(rc == MPI_SUCCESS, "four allreduces under NBC_TRACE", "rc %d: %s", rc, nbc_error_message());
    nbc_finalize();
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 3 && !strcmp(argv[1], "--init-error")) {
        int rc = nbc_init();
        char name[160];
        snprintf(name, sizeof name, "a bad %s fails nbc_init, naming it", argv[2]);
        check(rc != MPI_SUCCESS && strstr(nbc_error_message(), argv[2]), name, "rc %d: %s", rc, nbc_error_message());
    } else if (argc == 2 && !strcmp(argv[1], "--trace")) {
        trace_run();
    } else {
        setenv("NBC_MAX_INSNS", "1000", 1); /* read at nbc_init, by the first call */
        hostile_schedules();
        files();
        request_errors();
        nbc_finalize();
    }
    MPI_Finalize();
    return failures != 0;
}
