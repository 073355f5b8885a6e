# nbc: non-blocking collectives from schedules. `make` builds everything; `make demo` runs the
# example under mpiexec; `make test` runs every test; `make install PREFIX=...` installs.

# The MPI is named, never taken from Debian's alternatives (installing Open MPI or python3-torch
# switches plain mpicc to Open MPI): MPI=mpich (the default) or MPI=openmpi.
MPI      ?= mpich
MPI_PACKAGES_mpich   := mpich libmpich-dev
MPI_PACKAGES_openmpi := openmpi-bin libopenmpi-dev
PACKAGES := $(MPI_PACKAGES_$(MPI)) flex bison libxxhash-dev libxml2-utils clang
PREFIX   ?= /usr/local
BUILD    ?= build
BINDIR   ?= bin
CC       := mpicc.$(MPI)
MPIEXEC  := mpiexec.$(MPI)
export MPIEXEC
CFLAGS   ?= -O2 -g
CPPFLAGS := -D_GNU_SOURCE -Iruntime -I$(BUILD)/gen -Idsl
WARN     := -Wall -Wextra -Werror
ALLFLAGS  = -std=gnu11 $(WARN) $(CFLAGS) $(CPPFLAGS)
LDLIBS   := -lxxhash -lm
VERSION  := 0.1.0

LIB_SRC := $(sort $(wildcard dsl/*.c compiler/*.c interp/*.c runtime/*.c))
GEN_SRC := $(BUILD)/gen/parser.c $(BUILD)/gen/lexer.c $(BUILD)/gen/builtin_schedules.c $(BUILD)/gen/default_rules.c
SCHEDULES := $(sort $(wildcard schedules/*.nbs))
LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC)) \
           $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(GEN_SRC))

TESTS    := unit_dsl unit_select unit_reduce unit_cache mpi_allreduce mpi_badargs mpi_runtime mpi_collectives \
            mpi_total_reduce mpi_lifecycle mpi_threads
EXAMPLES := overlap

STATIC := $(BUILD)/lib/libnbc.a
SHARED := $(BUILD)/lib/libnbc.so
NBCC   := $(BINDIR)/nbcc

.PHONY: all demo test install clean deps docs
all: $(STATIC) $(SHARED) $(NBCC) $(EXAMPLES:%=$(BINDIR)/%) $(TESTS:%=$(BUILD)/tests/%)

# Missing Debian packages are installed once per build directory.
deps: $(BUILD)/.deps
$(BUILD)/.deps: tools/install-deps.sh Makefile
	@mkdir -p $(BUILD)
	@sh tools/install-deps.sh $(PACKAGES)
	@touch $@

$(BUILD)/gen/parser.c $(BUILD)/gen/parser.h &: dsl/parser.y | $(BUILD)/.deps
	@mkdir -p $(BUILD)/gen
	bison -Wall --defines=$(BUILD)/gen/parser.h -o $(BUILD)/gen/parser.c $<

$(BUILD)/gen/lexer.c $(BUILD)/gen/lexer.h &: dsl/lexer.l | $(BUILD)/.deps
	@mkdir -p $(BUILD)/gen
	flex --header-file=$(BUILD)/gen/lexer.h -o $(BUILD)/gen/lexer.c $<

$(BUILD)/gen/builtin_schedules.c: $(SCHEDULES) tools/embed-schedules.sh
	@mkdir -p $(BUILD)/gen
	sh tools/embed-schedules.sh nbc_builtin_schedules nbc_builtin_count $(SCHEDULES) > $@

$(BUILD)/gen/default_rules.c: runtime/default.rules tools/embed-schedules.sh
	@mkdir -p $(BUILD)/gen
	sh tools/embed-schedules.sh nbc_default_rules nbc_default_rules_count runtime/default.rules > $@

# Generated headers must exist before anything includes them.
$(LIB_OBJ): $(BUILD)/gen/parser.h $(BUILD)/gen/lexer.h | $(BUILD)/.deps

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -fPIC -MMD -MP -c $< -o $@

# The kernels are worth -O3 (vectorization).
$(BUILD)/obj/interp/reduce.o: interp/reduce.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -O3 -fPIC -MMD -MP -c $< -o $@

# flex's output trips a few warnings that are not ours to fix.
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -Wno-unused-function -Wno-sign-compare -fPIC -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libnbc.so.0 -o $@ $^ $(LDLIBS)

$(NBCC): tools/nbcc.c tools/nbcc_select.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -MMD -MP tools/nbcc.c tools/nbcc_select.c $(STATIC) $(LDLIBS) -o $@

$(BINDIR)/%: examples/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(STATIC) $(LDLIBS) -o $@

# These tests count allocations by wrapping malloc at link time.
$(BUILD)/tests/unit_cache $(BUILD)/tests/mpi_runtime: $(BUILD)/tests/%: tests/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc $< $(STATIC) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(STATIC) $(LDLIBS) -o $@

demo: all
	$(MPIEXEC) -n 4 $(BINDIR)/overlap

# The whole suite, then again built with AddressSanitizer and UBSan; the thread tests also
# built with ThreadSanitizer (clang's: gcc 12's crashes at start-up on this kernel).
SANITIZE := build/sanitize
TSAN     := build/tsan
TSAN_CC_mpich   := mpicc.mpich -cc=clang
TSAN_CC_openmpi := OMPI_CC=clang mpicc.openmpi
test: all
	@$(MAKE) --no-print-directory BUILD=$(SANITIZE) BINDIR=$(SANITIZE)/bin \
	    CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all > $(SANITIZE).log 2>&1 \
	    || { tail -n 30 $(SANITIZE).log; exit 1; }
	@$(MAKE) --no-print-directory BUILD=$(TSAN) BINDIR=$(TSAN)/bin CC="$(TSAN_CC_$(MPI))" \
	    CFLAGS="-O1 -g -fsanitize=thread" $(TSAN)/tests/mpi_threads > $(TSAN).log 2>&1 \
	    || { tail -n 30 $(TSAN).log; exit 1; }
	@BUILD=$(BUILD) BINDIR=$(BINDIR) SANITIZE_BUILD=$(SANITIZE) TSAN_BUILD=$(TSAN) sh tests/run.sh

# The benchmark (bench/): nbc against MPICH on P processes (make bench P=4), results in
# bench/results/. Its own tools are installed on first use; `make test` needs none of them.
BENCH_PACKAGES := gnuplot-nox valgrind
BENCH_PROGS := $(BUILD)/bench/bench $(BUILD)/bench/kernels $(BUILD)/bench/cgcall
P ?= 2
.PHONY: bench
bench: all $(BENCH_PROGS) $(BUILD)/.bench-deps
	sh bench/run.sh $(BINDIR) $(BUILD) $(P)

# The training-step benchmark (bench/training.c, docs/total-reduce.md): every way of reducing
# ResNet-50's and BERT-base's gradients in one run, at P processes (make bench-training P=4).
# TRAINING_ARGS adds options to bench/training.
.PHONY: bench-training
bench-training: $(BUILD)/bench/training $(BUILD)/.bench-deps
	sh bench/training.sh $(BUILD) $(P)

$(BUILD)/.bench-deps: tools/install-deps.sh
	@mkdir -p $(BUILD)
	@sh tools/install-deps.sh $(BENCH_PACKAGES)
	@touch $@

$(BUILD)/bench/%: bench/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(STATIC) $(LDLIBS) -o $@

# Tables in docs/ that are read off the compiled programs.
docs: $(NBCC)
	sh tools/algorithms-table.sh $(NBCC) > docs/algorithms.md

install: all
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/share/nbc/schedules
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/libnbc.so.0
	ln -sf libnbc.so.0 $(DESTDIR)$(PREFIX)/lib/libnbc.so
	install -m 644 runtime/nbc.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(NBCC) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(SCHEDULES) $(DESTDIR)$(PREFIX)/share/nbc/schedules/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' tools/nbc.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/nbc.pc

clean:
	rm -rf build bin

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
