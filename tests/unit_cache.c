/* Unit test of the program cache (runtime/cache.c), no MPI.
 *
 * Link with -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc: the linker then sends every
 * allocation made from this file and from cache.c through the counters below, which proves that
 * a cache hit allocates nothing. Leaks and use-after-free of detached entries are left to
 * AddressSanitizer (build with -fsanitize=address,undefined): the checks below read every held
 * program after it has left the table, and never release anything twice. Under ASan they also
 * ask whether a program block is freed right at its last release (and not later, by destroy).
 *
 * Output: one line per check, "ok cache <what>" or "FAIL cache <what>: <why>"; exit 1 on any
 * failure. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/cache.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

/* ---- allocation counting (see the header comment) ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static unsigned long nallocs;
void *__wrap_malloc(size_t n) { nallocs++; return __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { nallocs++; return __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { nallocs++; return __real_realloc(p, n); }

/* ---- reporting ---- */
static int failures;

static void check(int cond, const char *what, const char *why, ...)
{
    if (cond) {
        printf("ok cache %s\n", what);
    } else {
        va_list ap;
        va_start(ap, why);
        printf("FAIL cache %s: ", what);
        vprintf(why, ap);
        printf("\n");
        va_end(ap);
        failures++;
    }
    fflush(stdout);
}

/* ---- fakes ---- */
/* A program block of sizeof(nbc_program) + extra bytes, the payload filled with `tag` so that a
 * later read shows the block is still the one we made (and, under ASan, still alive). */
static nbc_program *make_prog(size_t extra, unsigned char tag)
{
    nbc_program *p = malloc(sizeof *p + extra);
    if (!p) {
        printf("FAIL cache setup: out of memory\n");
        exit(1);
    }
    memset(p, 0, sizeof *p);
    p->bytes = sizeof *p + extra;
    snprintf(p->name, sizeof p->name, "fake-%u", tag);
    memset((char *)p + sizeof *p, tag, extra);
    return p;
}

static int prog_intact(const nbc_program *p, unsigned char tag)
{
    const unsigned char *b = (const unsigned char *)p + sizeof *p;
    for (size_t i = 0; i < p->bytes - sizeof *p; i++)
        if (b[i] != tag)
            return 0;
    return 1;
}

/* 1: freed, 0: alive, -1: cannot tell. ASan poisons freed blocks and keeps them quarantined,
 * so asking about the first byte is safe and exact; without ASan there is no safe way. */
static int is_freed(const void *p)
{
#ifdef __SANITIZE_ADDRESS__
    return __asan_address_is_poisoned(p) ? 1 : 0;
#else
    (void)p;
    return -1;
#endif
}

/* Release the last hold on a detached entry and check that its program went with it. */
static void release_last(cache *c, cache_entry *e, const char *what)
{
    const nbc_program *p = cache_entry_program(e);
    int before = is_freed(p);
    cache_release(c, e);
    int after = is_freed(p);
    if (after < 0)
        check(1, what, "");  /* only ASan can tell; the rest of the check ran */
    else
        check(before == 0 && after == 1, what, "program %s before, %s after the last release",
              before ? "freed" : "alive", after ? "freed" : "alive");
}

static cache_key key_of(uint64_t schedule)
{
    cache_key k = { .schedule = schedule, .p = 8, .rank = 3, .count = 1024, .esize = 8,
                    .flags = 2, .root = 0, .param = 0 };
    return k;
}

static cache_stats stats_of(const cache *c)
{
    cache_stats s;
    cache_get_stats(c, &s);
    return s;
}

/* Is the key cached? Leaves the entry released (but touches LRU order and the hit counter). */
static int cached(cache *c, uint64_t schedule)
{
    cache_key k = key_of(schedule);
    cache_entry *e = cache_acquire(c, &k);
    if (e)
        cache_release(c, e);
    return e != NULL;
}

/* Insert and release at once: the entry stays cached, unheld. */
static void put(cache *c, uint64_t schedule, size_t extra)
{
    cache_key k = key_of(schedule);
    cache_entry *e = cache_insert(c, &k, make_prog(extra, (unsigned char)schedule));
    if (!e) {
        printf("FAIL cache setup: insert failed\n");
        exit(1);
    }
    cache_release(c, e);
}

#define P(extra) (sizeof(nbc_program) + (extra))

/* ---- tests ---- */
static void test_hits_and_misses(void)
{
    cache *c = cache_create(8, 1 << 20);
    cache_key k = key_of(1);
    check(cache_acquire(c, &k) == NULL, "miss on empty cache", "acquire returned an entry");
    nbc_program *prog = make_prog(100, 1);
    cache_entry *e = cache_insert(c, &k, prog);
    check(e && cache_entry_program(e) == prog, "insert returns the entry of the program",
          "entry %p program mismatch", (void *)e);
    cache_release(c, e);
    cache_entry *h = cache_acquire(c, &k);
    check(h == e && cache_entry_program(h) == prog, "hit after insert returns the same entry",
          "got %p, want %p", (void *)h, (void *)e);
    if (h)
        cache_release(c, h);
    cache_stats s = stats_of(c);
    check(s.hits == 1 && s.misses == 1, "hit and miss counters", "hits %llu misses %llu",
          (unsigned long long)s.hits, (unsigned long long)s.misses);
    check(s.entries == 1 && s.bytes == P(100) && s.evictions == 0 && s.max_entries == 8 &&
          s.max_bytes == 1 << 20, "entries, bytes and bounds in stats",
          "entries %llu bytes %llu evictions %llu", (unsigned long long)s.entries,
          (unsigned long long)s.bytes, (unsigned long long)s.evictions);
    cache_destroy(c);
}

/* Lookups try the most recently used entry first: alternating keys must each find their own. */
static void test_alternating(void)
{
    cache *c = cache_create(8, 1 << 20);
    put(c, 1, 10);
    put(c, 2, 20);
    int ok = 1;
    for (int i = 0; i < 6; i++) {
        uint64_t want = 1 + (uint64_t)(i % 3 == 2); /* 1, 1, 2, 1, 1, 2: repeats and switches */
        cache_key k = key_of(want);
        cache_entry *e = cache_acquire(c, &k);
        ok &= e && cache_entry_program(e)->bytes == P(want * 10);
        if (e) cache_release(c, e);
    }
    cache_key k = key_of(3);
    ok &= cache_acquire(c, &k) == NULL;
    check(ok, "alternating and repeated lookups find their own entries", "wrong entry returned");
    cache_destroy(c);
}

static void test_full_key(void)
{
    cache *c = cache_create(64, 1 << 20);
    cache_key base = key_of(7);
    cache_entry *e = cache_insert(c, &base, make_prog(8, 0));
    cache_release(c, e);
    /* one variant per field before the vectors (test_vector_keys has those), each differing
     * from base in that field only */
    enum { NFIELDS = offsetof(cache_key, nvec) / sizeof(int64_t) };
    int distinct = 1, found = 1;
    for (int f = 0; f < NFIELDS; f++) {
        cache_key k = base;
        ((int64_t *)(void *)&k)[f] ^= 1;
        if (cache_acquire(c, &k)) {  /* must miss before its own insert */
            distinct = 0;
            continue;
        }
        cache_release(c, cache_insert(c, &k, make_prog(8, (unsigned char)(f + 1))));
    }
    for (int f = 0; f < NFIELDS; f++) {
        cache_key k = base;
        ((int64_t *)(void *)&k)[f] ^= 1;
        cache_entry *h = cache_acquire(c, &k);
        if (!h || !prog_intact(cache_entry_program(h), (unsigned char)(f + 1)))
            found = 0;
        if (h)
            cache_release(c, h);
    }
    cache_entry *h = cache_acquire(c, &base);
    if (!h || !prog_intact(cache_entry_program(h), 0))
        found = 0;
    if (h)
        cache_release(c, h);
    check(distinct, "keys differing in one field do not hit each other",
          "a variant hit the base entry");
    check(found && stats_of(c).entries == NFIELDS + 1, "each one-field variant is its own entry",
          "entries %llu", (unsigned long long)stats_of(c).entries);
    cache_destroy(c);
}

static void test_lru_by_entries(void)
{
    cache *c = cache_create(3, 1 << 20);
    put(c, 1, 10);
    put(c, 2, 10);
    put(c, 3, 10);
    cached(c, 1);  /* 1 becomes most recent: 2 is now least recent */
    put(c, 4, 10);
    int ok2 = !cached(c, 2), ok = cached(c, 1) && cached(c, 3) && cached(c, 4);
    cache_stats s = stats_of(c);
    check(ok2 && ok && s.entries == 3 && s.evictions == 1, "LRU eviction by entries",
          "2 gone %d, 1/3/4 kept %d, entries %llu, evictions %llu", ok2, ok,
          (unsigned long long)s.entries, (unsigned long long)s.evictions);
    /* order now 4,3,1 (most recent first): two more inserts evict 1 then 3 */
    put(c, 5, 10);
    put(c, 6, 10);
    ok = !cached(c, 1) && !cached(c, 3) && cached(c, 4) && cached(c, 5) && cached(c, 6);
    check(ok && stats_of(c).evictions == 3, "LRU eviction order follows use", "wrong survivors");
    cache_destroy(c);
}

static void test_lru_by_bytes(void)
{
    const size_t S = 1000;
    cache *c = cache_create(100, 4 * P(S));
    put(c, 1, S);
    put(c, 2, S);
    put(c, 3, S);
    cached(c, 1);        /* order 1,3,2 */
    put(c, 4, S);        /* exactly at the bound: nothing evicted */
    cache_stats s = stats_of(c);
    check(s.evictions == 0 && s.bytes == 4 * P(S), "at the byte bound nothing is evicted",
          "evictions %llu bytes %llu", (unsigned long long)s.evictions,
          (unsigned long long)s.bytes);
    put(c, 5, P(S) + S); /* two programs' worth: 2 and then 3 must go */
    int gone = !cached(c, 2) && !cached(c, 3);
    int kept = cached(c, 1) && cached(c, 4) && cached(c, 5);
    s = stats_of(c);
    check(gone && kept && s.evictions == 2 && s.entries == 3 && s.bytes == 4 * P(S),
          "LRU eviction by bytes", "gone %d kept %d evictions %llu entries %llu bytes %llu",
          gone, kept, (unsigned long long)s.evictions, (unsigned long long)s.entries,
          (unsigned long long)s.bytes);
    cache_destroy(c);
}

static void test_held_survives_eviction(void)
{
    cache *c = cache_create(1, 1 << 20);
    cache_key ka = key_of(1);
    cache_entry *a = cache_insert(c, &ka, make_prog(500, 0xA1));
    cache_entry *a2 = cache_acquire(c, &ka);  /* held twice */
    put(c, 2, 10);                            /* evicts a */
    cache_stats s = stats_of(c);
    check(a2 == a && s.evictions == 1 && s.entries == 1 && s.bytes == P(10),
          "evicting a held entry unlinks it", "evictions %llu entries %llu bytes %llu",
          (unsigned long long)s.evictions, (unsigned long long)s.entries,
          (unsigned long long)s.bytes);
    check(!cached(c, 1), "an evicted held entry is no longer found", "acquire hit it");
    cache_release(c, a);
    check(prog_intact(cache_entry_program(a), 0xA1), "held entry alive after eviction",
          "program contents changed");
    release_last(c, a2, "evicted held entry freed at its last release");
    put(c, 1, 20);         /* the key can be cached again */
    check(cached(c, 1) && !cached(c, 2), "evicted key can be inserted again", "not found");
    cache_destroy(c);
}

static void test_oversized(void)
{
    cache *c = cache_create(8, 1000);
    put(c, 1, 10);
    cache_key k = key_of(2);
    cache_entry *e = cache_insert(c, &k, make_prog(2000, 0xB2));
    cache_stats s = stats_of(c);
    check(e && prog_intact(cache_entry_program(e), 0xB2), "oversized program returned acquired",
          "no entry or bad program");
    check(s.entries == 1 && s.bytes == P(10) && s.evictions == 0 && cached(c, 1) && !cached(c, 2),
          "oversized program is not cached and evicts nothing", "entries %llu bytes %llu",
          (unsigned long long)s.entries, (unsigned long long)s.bytes);
    if (e)
        release_last(c, e, "oversized program freed at its last release");
    cache_destroy(c);
}

static void test_double_insert(void)
{
    cache *c = cache_create(8, 1 << 20);
    cache_key k = key_of(3);
    cache_entry *e1 = cache_insert(c, &k, make_prog(30, 0xC1));  /* held */
    cache_entry *e2 = cache_insert(c, &k, make_prog(40, 0xC2));  /* same key, newer */
    cache_entry *h = cache_acquire(c, &k);
    cache_stats s = stats_of(c);
    check(e1 != e2 && h == e2 && s.entries == 1 && s.bytes == P(40),
          "double insert keeps the newer program", "entries %llu bytes %llu, hit %s",
          (unsigned long long)s.entries, (unsigned long long)s.bytes,
          h == e2 ? "newer" : h == e1 ? "older" : "none");
    check(prog_intact(cache_entry_program(e1), 0xC1), "double insert leaves the older one alive",
          "older program changed");
    release_last(c, e1, "older program freed at its last release");
    if (h)
        cache_release(c, h);
    cache_release(c, e2);
    /* an unheld older entry is freed at once by the replacement */
    put(c, 4, 30);
    cache_key k4 = key_of(4);
    cache_entry *o = cache_acquire(c, &k4);
    const nbc_program *op = o ? cache_entry_program(o) : NULL;
    if (o)
        cache_release(c, o);
    put(c, 4, 50);
    int fr = op ? is_freed(op) : 0;
    check(fr != 0, "replaced unheld program freed at once", "older program still allocated");
    s = stats_of(c);
    check(s.entries == 2 && s.bytes == P(40) + P(50), "double insert of an unheld entry",
          "entries %llu bytes %llu", (unsigned long long)s.entries, (unsigned long long)s.bytes);
    cache_destroy(c);
}

static void test_zero_bounds(void)
{
    size_t bounds[2][2] = { { 0, 1 << 20 }, { 8, 0 } };
    for (int i = 0; i < 2; i++) {
        cache *c = cache_create(bounds[i][0], bounds[i][1]);
        cache_key k = key_of(5);
        cache_entry *e = cache_insert(c, &k, make_prog(10, 0xD5));
        int ok = e && prog_intact(cache_entry_program(e), 0xD5);
        cache_stats s = stats_of(c);
        ok = ok && s.entries == 0 && s.bytes == 0 && !cached(c, 5);
        check(ok, i == 0 ? "max_entries 0 keeps nothing" : "max_bytes 0 keeps nothing",
              "entries %llu bytes %llu", (unsigned long long)s.entries,
              (unsigned long long)s.bytes);
        if (e)
            release_last(c, e, i == 0 ? "max_entries 0: program freed at release"
                                      : "max_bytes 0: program freed at release");
        cache_destroy(c);
    }
}

static void test_clear(void)
{
    cache *c = cache_create(8, 1 << 20);
    put(c, 1, 10);
    cache_key k2 = key_of(2);
    cache_entry *held = cache_insert(c, &k2, make_prog(10, 0xE2));
    put(c, 3, 10);
    cache_clear(c);
    cache_stats s = stats_of(c);
    int gone = !cached(c, 1) && !cached(c, 2) && !cached(c, 3);
    check(gone && s.entries == 0 && s.bytes == 0 && s.evictions == 0, "clear empties the cache",
          "entries %llu bytes %llu evictions %llu", (unsigned long long)s.entries,
          (unsigned long long)s.bytes, (unsigned long long)s.evictions);
    check(prog_intact(cache_entry_program(held), 0xE2), "clear keeps held programs alive",
          "program changed");
    release_last(c, held, "cleared held program freed at its last release");
    put(c, 2, 10);
    check(cached(c, 2), "cache usable after clear", "insert not found");
    cache_destroy(c);
}

static void test_destroy_with_held(void)
{
    cache *c = cache_create(1, 1 << 20);
    cache_key k1 = key_of(1), k2 = key_of(2), k3 = key_of(3);
    cache_entry *a = cache_insert(c, &k1, make_prog(10, 1));
    cache_entry *b = cache_insert(c, &k2, make_prog(10, 2));    /* detaches a */
    cache_entry *o = cache_insert(c, &k3, make_prog(1 << 21, 3)); /* oversized, detached */
    (void)a, (void)b, (void)o;
    cache_destroy(c);  /* must free a, b and o: ASan reports leaks otherwise */
    check(1, "destroy with held and detached entries", "");
}

static void test_hit_does_not_allocate(void)
{
    cache *c = cache_create(8, 1 << 20);
    cache_key k = key_of(9);
    nbc_program *prog = make_prog(10, 9);
    unsigned long before = nallocs;
    cache_entry *e = cache_insert(c, &k, prog);
    check(nallocs > before, "malloc wrapping sees allocations made by cache.c",
          "insert made no counted allocation: link with -Wl,--wrap=malloc,...");
    cache_release(c, e);
    before = nallocs;
    int all = 1;
    for (int i = 0; i < 1000; i++) {
        cache_entry *h = cache_acquire(c, &k);
        if (!h) {
            all = 0;
            break;
        }
        cache_release(c, h);
    }
    unsigned long after = nallocs;
    check(all && after == before, "1000 hits allocate nothing", "%lu allocations, all hit %d",
          after - before, all);
    cache_destroy(c);
}

static void test_many_entries(void)
{
    /* enough keys to grow the table several times */
    enum { N = 5000 };
    cache *c = cache_create(N, (size_t)N * P(16));
    for (uint64_t i = 0; i < N; i++)
        put(c, i, 16);
    int all = 1;
    for (uint64_t i = 0; i < N; i++) {
        cache_key k = key_of(i);
        cache_entry *e = cache_acquire(c, &k);
        if (!e || !prog_intact(cache_entry_program(e), (unsigned char)i))
            all = 0;
        if (e)
            cache_release(c, e);
    }
    cache_stats s = stats_of(c);
    check(all && s.entries == N && s.evictions == 0 && s.hits == N,
          "5000 entries all found after table growth", "entries %llu hits %llu",
          (unsigned long long)s.entries, (unsigned long long)s.hits);
    put(c, N, 16);  /* one over: the oldest untouched since the lookups, key 0, goes */
    check(!cached(c, 0) && cached(c, 1) && stats_of(c).evictions == 1,
          "eviction after growth takes the least recent", "wrong entry evicted");
    cache_destroy(c);
}

/* A vector collective's vectors are part of the key, compared value by value: other values
 * miss, equal values in another array hit, and the cache keeps its own copy. */
static void test_vector_keys(void)
{
    cache *c = cache_create(8, 1 << 20);
    int64_t v1[8] = {1, 2, 0, 3, 0, 1, 3, 6}, v2[8] = {1, 2, 0, 3, 0, 1, 3, 7}, same[8];
    memcpy(same, v1, sizeof same);
    cache_key k1 = key_of(9), k2 = key_of(9), k3 = key_of(9), k0 = key_of(9);
    k1.vec = v1, k1.nvec = 8;
    k2.vec = v2, k2.nvec = 8;
    k3.vec = same, k3.nvec = 8;
    cache_entry *e1 = cache_insert(c, &k1, make_prog(10, 1));
    if (e1) cache_release(c, e1);
    v1[0] = 99; /* the caller's array changes: the cache's copy does not */
    cache_entry *h = cache_acquire(c, &k3);
    check(h == e1 && e1, "equal vectors in another array find the program", "got %p, want %p", (void *)h, (void *)e1);
    if (h) cache_release(c, h);
    check(cache_acquire(c, &k2) == NULL, "other vectors (one value differs) miss", "found another call's program");
    check(cache_acquire(c, &k1) == NULL, "the caller's changed array misses", "found the program of the old values");
    check(cache_acquire(c, &k0) == NULL, "the same key without vectors misses", "found a vector call's program");
    cache_entry *e2 = cache_insert(c, &k2, make_prog(10, 2));
    if (e2) cache_release(c, e2);
    h = cache_acquire(c, &k3);
    check(h == e1, "both programs are kept, each under its own vectors", "got %p, want %p", (void *)h, (void *)e1);
    if (h) cache_release(c, h);
    cache_destroy(c);
}

int main(void)
{
    test_vector_keys();
    test_hits_and_misses();
    test_alternating();
    test_full_key();
    test_lru_by_entries();
    test_lru_by_bytes();
    test_held_survives_eviction();
    test_oversized();
    test_double_insert();
    test_zero_bounds();
    test_clear();
    test_destroy_with_held();
    test_hit_does_not_allocate();
    test_many_entries();
    return failures ? 1 : 0;
}
