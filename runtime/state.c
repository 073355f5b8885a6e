/* The one instance of the runtime's state (state.h), with the values it starts from. */
#include "state.h"

nbc_state nbc_rt = {
    .threads = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .level = MPI_THREAD_MULTIPLE},
    .life = {.finalize_keyval = MPI_KEYVAL_INVALID},
    .comms = {.keyval = MPI_KEYVAL_INVALID, .last_comm = MPI_COMM_NULL},
    .sel = {.auto_generation = UINT64_MAX},
};
