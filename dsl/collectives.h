/* The collectives a schedule can implement. */
#ifndef NBC_COLLECTIVES_H
#define NBC_COLLECTIVES_H

typedef enum { COLL_ALLREDUCE, COLL_COUNT_ } nbc_collective;

extern const char *const collective_names[COLL_COUNT_];
int collective_from_name(const char *name); /* -1 when unknown */

#endif
