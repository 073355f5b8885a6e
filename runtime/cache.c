/* The program cache (interface and contract in cache.h).
 *
 * A chained hash table finds entries by key. Cached entries also sit on an LRU list, most
 * recently used at the head, so eviction takes the tail. An entry that must leave the table
 * while a request still holds it (evicted, replaced by a newer program for the same key, cleared,
 * or too big to cache at all) is "detached": it moves to a second list, kept only so that
 * cache_destroy can find it, and its last cache_release frees it. */
#include "cache.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct cache_entry {
    cache_key key;
    uint64_t hash;            /* of key: kept so that lookups and resizing skip rehashing */
    nbc_program *prog;
    size_t refs;              /* acquisitions not yet released */
    int cached;               /* 1: in the table and on the LRU list; 0: detached */
    cache_entry *chain;       /* next entry in the same bucket */
    cache_entry *prev, *next; /* on the LRU list or the detached list */
};

typedef struct {
    cache_entry *head, *tail;
} entry_list;

struct cache {
    cache_entry **buckets;
    size_t nbuckets;          /* a power of two, so a bucket is hash & (nbuckets - 1) */
    entry_list lru;           /* cached entries, most recently used first */
    entry_list detached;      /* held entries no longer in the table */
    size_t max_entries, max_bytes;
    uint64_t hits, misses, evictions, entries, bytes;
};

enum { INITIAL_BUCKETS = 16 };

static void list_push_front(entry_list *l, cache_entry *e)
{
    e->prev = NULL;
    e->next = l->head;
    if (l->head)
        l->head->prev = e;
    else
        l->tail = e;
    l->head = e;
}

static void list_unlink(entry_list *l, cache_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        l->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        l->tail = e->prev;
    e->prev = e->next = NULL;
}

/* Every field before vec is 64-bit, so that part has no padding and its bytes are exactly
 * the key's fixed part; the vectors are compared value by value. */
#define FIXED_BYTES offsetof(cache_key, vec)

static uint64_t key_hash(const cache_key *k)
{
    uint64_t h = XXH3_64bits(k, FIXED_BYTES);
    return k->nvec ? XXH3_64bits_withSeed(k->vec, (size_t)k->nvec * sizeof *k->vec, h) : h;
}

static int key_equal(const cache_key *a, const cache_key *b)
{
    return memcmp(a, b, FIXED_BYTES) == 0 && (a->nvec == 0 || memcmp(a->vec, b->vec, (size_t)a->nvec * sizeof *a->vec) == 0);
}

static cache_entry **bucket_of(const cache *c, uint64_t h)
{
    return &c->buckets[h & (c->nbuckets - 1)];
}

static cache_entry *table_find(const cache *c, const cache_key *k, uint64_t h)
{
    /* the hash only narrows the search: equal keys are confirmed byte for byte */
    for (cache_entry *e = *bucket_of(c, h); e; e = e->chain)
        if (e->hash == h && key_equal(&e->key, k))
            return e;
    return NULL;
}

static void free_entry(cache_entry *e)
{
    free(e->prog);
    free(e);
}

/* Take a cached entry out of the table and the LRU list. Nobody holds it: free it now.
 * Otherwise detach it and let its last release free it. */
static void drop(cache *c, cache_entry *e)
{
    cache_entry **pp = bucket_of(c, e->hash);
    while (*pp != e)
        pp = &(*pp)->chain;
    *pp = e->chain;
    list_unlink(&c->lru, e);
    c->entries--;
    c->bytes -= e->prog->bytes;
    e->cached = 0;
    if (e->refs == 0)
        free_entry(e);
    else
        list_push_front(&c->detached, e);
}

/* Double the table once it averages one entry per bucket. Only the insert path calls this, so
 * hits never allocate. Failing to grow is harmless: chains just get longer. */
static void maybe_grow(cache *c)
{
    if (c->entries < c->nbuckets)
        return;
    size_t n = c->nbuckets * 2;
    cache_entry **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < c->nbuckets; i++) {
        cache_entry *e = c->buckets[i];
        while (e) {
            cache_entry *next = e->chain;
            cache_entry **dst = &b[e->hash & (n - 1)];
            e->chain = *dst;
            *dst = e;
            e = next;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->nbuckets = n;
}

cache *cache_create(size_t max_entries, size_t max_bytes)
{
    cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nbuckets = INITIAL_BUCKETS;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    return c;
}

void cache_destroy(cache *c)
{
    if (!c)
        return;
    entry_list *lists[] = { &c->lru, &c->detached };
    for (size_t i = 0; i < 2; i++) {
        cache_entry *e = lists[i]->head;
        while (e) {
            cache_entry *next = e->next;
            free_entry(e);
            e = next;
        }
    }
    free(c->buckets);
    free(c);
}

cache_entry *cache_acquire(cache *c, const cache_key *key)
{
    /* Calls mostly repeat the previous one: the two most recently used entries are tried first
     * (a call that may run through shared memory looks up two programs), which costs a
     * comparison of the key or two instead of hashing it. */
    cache_entry *e = c->lru.head;
    if (e && !key_equal(&e->key, key) && (!(e = e->next) || !key_equal(&e->key, key))) e = NULL;
    if (!e) e = table_find(c, key, key_hash(key));
    if (!e) {
        c->misses++;
        return NULL;
    }
    cache_reacquire(c, e);
    return e;
}

/* The entry, if still cached, becomes the most recently used. */
static void touch(cache *c, cache_entry *e)
{
    if (e->cached && c->lru.head != e) {
        list_unlink(&c->lru, e);
        list_push_front(&c->lru, e);
    }
}

void cache_reacquire(cache *c, cache_entry *e)
{
    assert(e->cached);
    c->hits++;
    touch(c, e);
    e->refs++;
}

void cache_reacquire_each(cache *c, cache_entry *const *e, int n)
{
    for (int i = 0; i < n; i++)
        if (e[i]) cache_reacquire(c, e[i]);
}

void cache_hit_each(cache *c, cache_entry *const *e, int n)
{
    for (int i = 0; i < n; i++) c->hits += e[i] != NULL;
}

void cache_touch_each(cache *c, cache_entry *const *e, int n)
{
    for (int i = 0; i < n; i++)
        if (e[i]) touch(c, e[i]);
}

int cache_entry_cached(const cache_entry *e) { return e->cached; }

cache_entry *cache_insert(cache *c, const cache_key *key, nbc_program *prog)
{
    size_t nvec = key->nvec > 0 ? (size_t)key->nvec : 0;
    cache_entry *e = malloc(sizeof *e + nvec * sizeof *key->vec); /* the key's vectors follow the entry */
    if (!e) {
        free(prog);
        return NULL;
    }
    e->key = *key;
    if (nvec) e->key.vec = memcpy(e + 1, key->vec, nvec * sizeof *key->vec);
    else e->key.vec = NULL, e->key.nvec = 0;
    e->hash = key_hash(key);
    e->prog = prog;
    e->refs = 1;
    e->chain = NULL;

    /* A program that breaks a bound on its own is never cached: inserting it would evict
     * everything else and then itself. Hand it out detached; its last release frees it. */
    if (c->max_entries == 0 || prog->bytes > c->max_bytes) {
        e->cached = 0;
        list_push_front(&c->detached, e);
        return e;
    }

    /* Two requests missed on the same key and both compiled it: the newer program replaces the
     * older, which lives on only while held. A replacement is not counted as an eviction. */
    cache_entry *old = table_find(c, key, e->hash);
    if (old)
        drop(c, old);

    maybe_grow(c);
    cache_entry **b = bucket_of(c, e->hash);
    e->chain = *b;
    *b = e;
    list_push_front(&c->lru, e);
    e->cached = 1;
    c->entries++;
    c->bytes += prog->bytes;

    /* The new entry fits both bounds alone and is at the head, so this stops before reaching it */
    while (c->entries > c->max_entries || c->bytes > c->max_bytes) {
        drop(c, c->lru.tail);
        c->evictions++;
    }
    return e;
}

void cache_release(cache *c, cache_entry *e)
{
    assert(e->refs > 0);
    /* cached entries stay at zero references: that is the point of caching them */
    if (--e->refs == 0 && !e->cached) {
        list_unlink(&c->detached, e);
        free_entry(e);
    }
}

void cache_release_each(cache *c, cache_entry **e, int n)
{
    for (int i = 0; i < n; i++)
        if (e[i]) {
            cache_release(c, e[i]);
            e[i] = NULL;
        }
}

const nbc_program *cache_entry_program(const cache_entry *e)
{
    return e->prog;
}

void cache_get_stats(const cache *c, cache_stats *out)
{
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->entries = c->entries;
    out->bytes = c->bytes;
    out->max_entries = c->max_entries;
    out->max_bytes = c->max_bytes;
}

void cache_clear(cache *c)
{
    /* drop frees unheld entries and detaches held ones; neither counts as an eviction */
    while (c->lru.head)
        drop(c, c->lru.head);
}
