/* The program cache: compiled programs keyed by everything that changes them, found by an XXH3
 * hash of the key and confirmed by comparing the whole key. Bounded in entries and bytes, least
 * recently used first out. A program held by a request (acquired and not yet released) is never
 * freed: evicting it only unlinks it, and the last release frees it. A hit allocates nothing. */
#ifndef NBC_CACHE_H
#define NBC_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "../compiler/program.h"

/* Filled in by programs_for_call (programs.c). */
typedef struct {
    uint64_t schedule;  /* a forced schedule's lib_identity (hash of its name and its file's
                           text); under automatic selection a value per collective, new each
                           time schedules, rules or the mode change */
    int64_t p, rank, count;
    int64_t esize;
    int64_t flags;      /* bit 0 in place, bit 1 commutative op, bit 2 shared memory, bit 3 a
                           node map (in vec, after the vectors), bits 4 .. 7 which vectors the
                           call has, bits 8 and up the call's nbufs (its buffers for
                           nbc_iallreduce_multi, 1 for the others) */
    int64_t root;
    int64_t param;      /* hash of a forced schedule's parameters and their values, 0 without */
    int64_t nvec;       /* a vector collective's per-rank vectors and the node map: nvec values at vec, */
    const int64_t *vec; /* compared exactly (the hash only finds the bucket); the cache keeps
                           its own copy, so the caller's may go once the call returns */
} cache_key;

typedef struct cache cache;
typedef struct cache_entry cache_entry;

cache *cache_create(size_t max_entries, size_t max_bytes);
void cache_destroy(cache *c);  /* frees every entry, held or not: call when no request lives */

/* A hit: the entry, acquired (its program stays alive until cache_release). NULL on a miss. */
cache_entry *cache_acquire(cache *c, const cache_key *key);
/* Takes ownership of prog (malloc'ed, prog->bytes long) and returns its entry, acquired.
 * Evicts least recently used entries to stay within bounds. NULL only when out of memory, in
 * which case prog has been freed. A program larger than max_bytes is still returned, acquired,
 * but not kept once released. */
cache_entry *cache_insert(cache *c, const cache_key *key, nbc_program *prog);
void cache_release(cache *c, cache_entry *e);
/* Acquires again an entry known to be still cached (a hit, as cache_acquire's). */
void cache_reacquire(cache *c, cache_entry *e);
/* The same for each of n entries of a set that is not NULL (a call's programs); release_each
 * leaves them NULL. */
void cache_release_each(cache *c, cache_entry **e, int n);
void cache_reacquire_each(cache *c, cache_entry *const *e, int n);
/* A use of each entry of the set that the caller has held since an earlier use (a request kept
 * with its programs, runtime/request.c) counts as a hit; the holder touches them when it lets
 * them go (each, if still cached, becomes the most recently used), which keeps the calls that
 * reuse them away from the LRU list. */
void cache_hit_each(cache *c, cache_entry *const *e, int n);
void cache_touch_each(cache *c, cache_entry *const *e, int n);
int cache_entry_cached(const cache_entry *e); /* in the table (not detached) */
const nbc_program *cache_entry_program(const cache_entry *e);

typedef struct {
    uint64_t hits, misses, evictions, entries, bytes, max_entries, max_bytes;
} cache_stats;
void cache_get_stats(const cache *c, cache_stats *out);
void cache_clear(cache *c);    /* drop every unheld entry (after schedules change) */

#endif
