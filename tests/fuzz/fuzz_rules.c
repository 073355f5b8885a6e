/* libFuzzer driver: a rule file, loaded into a table after the built-in rules, then the
 * schedule chosen under it for calls of every collective at small and extreme sizes. */
#include <stdint.h>
#include <stdlib.h>

#include "../../compiler/library.h"
#include "../../runtime/selection.h"

#include "builtin.h"

static sched_lib *lib; /* the built-in schedules, parsed once: rules only read it */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    diag d;
    diag_init(&d);
    if (!lib) {
        lib = lib_create();
        if (!lib || lib_add_builtins(lib, &d) != 0) abort();
    }
    rule_table *t = rules_create();
    const struct builtin_schedule *dr = &nbc_default_rules[0];
    if (!t || rules_add(t, lib, dr->name, dr->text, dr->len, 0, &d) != 0) abort();
    int replace = size > 0 && (data[0] & 1);
    if (rules_add(t, lib, "fuzz.rules", (const char *)data, size, replace, &d) == 0) {
        static const int64_t calls[][2] = {{1, 1}, {2, 8}, {3, 1000}, {64, 1 << 20}, {INT32_MAX, INT32_MAX}, {5, INT64_MAX / 4}};
        for (int c = 0; c < COLL_COUNT_; c++)
            for (size_t k = 0; k < sizeof calls / sizeof *calls; k++) {
                compile_args a = {.p = calls[k][0], .rank = 0, .count = calls[k][1], .esize = 8, .commutative = 1,
                                  .nbufs = 1, .max_steps = 1 << 16};
                diag why;
                diag_init(&why);
                select_choose(lib, t, SELECT_RULES, NULL, (nbc_collective)c, &a, &why);
                diag_free(&why);
            }
    }
    rules_destroy(t);
    diag_free(&d);
    return 0;
}
