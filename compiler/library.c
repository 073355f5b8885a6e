#include "library.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

typedef struct {
    const sched_def *def;
    uint64_t id;
} lib_entry;

struct sched_lib {
    lib_entry *entries;
    size_t n, cap;
    ast_file **files;  /* kept while the library lives: replaced schedules may share a file */
    size_t nfiles, fcap;
};

sched_lib *lib_create(void) { return calloc(1, sizeof(sched_lib)); }

void lib_destroy(sched_lib *lib)
{
    if (!lib) return;
    for (size_t i = 0; i < lib->nfiles; i++) ast_free(lib->files[i]);
    free(lib->files);
    free(lib->entries);
    free(lib);
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *t = realloc(*arr, c * elem);
    if (!t) return -1;
    *arr = t;
    *cap = c;
    return 0;
}

int lib_add_source(sched_lib *lib, const char *name, const char *text, size_t len, diag *d)
{
    ast_file *f = dsl_parse(name, text, len, d);
    if (!f) return -1;
    size_t count = 0;
    for (sched_def *s = f->schedules; s; s = s->next) count++;
    if (grow((void **)&lib->files, &lib->fcap, lib->nfiles + 1, sizeof *lib->files) ||
        grow((void **)&lib->entries, &lib->cap, lib->n + count, sizeof *lib->entries)) {
        ast_free(f);
        diag_error(d, NULL, (loc){0, 0}, "%s: out of memory", name);
        return -1;
    }
    lib->files[lib->nfiles++] = f;
    uint64_t file_hash = XXH3_64bits(f->src.text, f->src.len);
    for (sched_def *s = f->schedules; s; s = s->next) {
        lib_entry e = {s, XXH3_64bits_withSeed(s->name, strlen(s->name), file_hash)};
        size_t i = 0;
        while (i < lib->n && strcmp(lib->entries[i].def->name, s->name) != 0) i++;
        lib->entries[i] = e;
        if (i == lib->n) lib->n++;
    }
    return 0;
}

#include "builtin.h"

int lib_add_builtins(sched_lib *lib, diag *d)
{
    for (size_t i = 0; i < nbc_builtin_count; i++) {
        const struct builtin_schedule *b = &nbc_builtin_schedules[i];
        if (lib_add_source(lib, b->name, b->text, b->len, d) != 0) return -1;
    }
    return 0;
}

/* Reads at most LIB_MAX_FILE_BYTES + 1 bytes, whatever the file is: a regular file says its
 * size up front, but a device (/dev/zero), a pipe or a file growing while it is read must
 * not make the reading endless. */
char *lib_read_file(const char *path, size_t *len, diag *d)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        diag_error(d, NULL, (loc){0, 0}, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        diag_error(d, NULL, (loc){0, 0}, "%s: is a directory", path);
        return NULL;
    }
    const size_t limit = LIB_MAX_FILE_BYTES;
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > limit) {
        close(fd);
        diag_error(d, NULL, (loc){0, 0}, "%s: %lld bytes is larger than the %zu MiB a schedule or rule file may have", path,
                   (long long)st.st_size, limit >> 20);
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    const char *why = NULL;
    for (;;) {
        if (grow((void **)&buf, &cap, *len + 65537, 1)) {
            why = "out of memory";
            break;
        }
        size_t room = cap - *len - 1, left = limit + 1 - *len; /* one byte past the limit tells */
        ssize_t got = read(fd, buf + *len, room < left ? room : left);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) why = strerror(errno);
        if (got <= 0) break;
        *len += (size_t)got;
        if (*len > limit) {
            why = "too large";
            break;
        }
    }
    close(fd);
    if (why) {
        free(buf);
        if (*len > limit)
            diag_error(d, NULL, (loc){0, 0}, "%s: larger than the %zu MiB a schedule or rule file may have", path, limit >> 20);
        else
            diag_error(d, NULL, (loc){0, 0}, "%s: %s", path, why);
        return NULL;
    }
    buf[*len] = '\0';
    return buf;
}

static int add_file(sched_lib *lib, const char *path, diag *d)
{
    size_t len;
    char *buf = lib_read_file(path, &len, d);
    if (!buf) return -1;
    int rc = lib_add_source(lib, path, buf, len, d);
    free(buf);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int lib_add_path(sched_lib *lib, const char *path, diag *d)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        diag_error(d, NULL, (loc){0, 0}, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return add_file(lib, path, d);
    DIR *dir = opendir(path);
    if (!dir) {
        diag_error(d, NULL, (loc){0, 0}, "%s: %s", path, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".nbs") != 0) continue;
        char *full = malloc(strlen(path) + l + 2);
        if (!full || grow((void **)&names, &cap, n + 1, sizeof *names)) {
            free(full);
            rc = -1;
            diag_error(d, NULL, (loc){0, 0}, "%s: out of memory", path);
            break;
        }
        sprintf(full, "%s/%s", path, e->d_name);
        names[n++] = full;
    }
    closedir(dir);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && add_file(lib, names[i], d) != 0) rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

const sched_def *lib_find(const sched_lib *lib, const char *name)
{
    for (size_t i = 0; i < lib->n; i++)
        if (strcmp(lib->entries[i].def->name, name) == 0) return lib->entries[i].def;
    return NULL;
}

size_t lib_count(const sched_lib *lib) { return lib->n; }
const sched_def *lib_at(const sched_lib *lib, size_t i) { return i < lib->n ? lib->entries[i].def : NULL; }

uint64_t lib_identity(const sched_lib *lib, const sched_def *s)
{
    for (size_t i = 0; i < lib->n; i++)
        if (lib->entries[i].def == s) return lib->entries[i].id;
    return 0;
}
