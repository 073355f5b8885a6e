# nbc: non-blocking collectives from schedules. `make` builds everything; `make demo` runs the
# example under mpiexec; `make test` runs every test; `make install PREFIX=...` installs.

# The MPI is named, never taken from Debian's alternatives (installing Open MPI or python3-torch
# switches plain mpicc to Open MPI): MPI=mpich (the default) or MPI=openmpi.
MPI      ?= mpich
MPI_PACKAGES_mpich   := mpich libmpich-dev
MPI_PACKAGES_openmpi := openmpi-bin libopenmpi-dev
MPI_PC_mpich   := mpich
MPI_PC_openmpi := ompi-c
PACKAGES := $(MPI_PACKAGES_$(MPI)) flex bison libxxhash-dev
# Only `make test` needs these: xmllint checks the SVGs, clang builds the ThreadSanitizer run,
# pkg-config and cmake build a program against an installed nbc; the Python suite needs Python's
# modules and Open MPI (the MPI Debian's mpi4py and torch run on).
TEST_PACKAGES := libxml2-utils clang pkg-config cmake python3-mpi4py python3-numpy python3-torch \
                 python3-torchvision openmpi-bin libopenmpi-dev python3-dev
# NO_DEPS=1 skips installing packages: every step then assumes they are there.
DEPS = $(if $(filter 1,$(NO_DEPS)),,$(BUILD)/.$(1))
PREFIX   ?= /usr/local
# Each MPI has its own build: MPICH's in build/ (programs in bin/), Open MPI's in build/openmpi.
BUILD_mpich   := build
BUILD_openmpi := build/openmpi
BUILD    ?= $(BUILD_$(MPI))
BINDIR   ?= $(if $(filter build,$(BUILD)),bin,$(BUILD)/bin)
CC       := mpicc.$(MPI)
# Open MPI refuses root and more ranks than cores unless told, and spins unless told to yield
# (tests run up to 33 ranks on 2 cores).
MPIEXEC_mpich   := mpiexec.mpich
MPIEXEC_openmpi := mpiexec.openmpi --oversubscribe
MPIEXEC  := $(MPIEXEC_$(MPI))
MPICC    := $(CC)
export MPIEXEC MPICC MPI
ifeq ($(MPI),openmpi)
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMPI_MCA_mpi_yield_when_idle := 1
endif
CFLAGS   ?= -O2 -g
# Headers are included by bare name, from every folder of the tree.
CPPFLAGS := -D_GNU_SOURCE -Iruntime -I$(BUILD)/gen -Idsl -Icompiler -Ianalysis -Iinterp
WARN     := -Wall -Wextra -Werror
ALLFLAGS  = -std=gnu11 $(WARN) $(CFLAGS) $(CPPFLAGS)
LDLIBS   := -lxxhash -lm
# The version is written once, in nbc.h.
VERSION  := $(shell sed -n 's/^\#define NBC_VERSION "\(.*\)"/\1/p' runtime/nbc.h)

# The library: schedules in (dsl), programs out (compiler), run (interp, runtime). The offline
# analysis (analysis/: verify, draw, compare, failures) goes into nbcc only.
LIB_SRC := $(sort $(wildcard dsl/*.c compiler/*.c interp/*.c runtime/*.c))
ANALYSIS_SRC := $(sort $(wildcard analysis/*.c))
ANALYSIS_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(ANALYSIS_SRC))
GEN_SRC := $(BUILD)/gen/parser.c $(BUILD)/gen/lexer.c $(BUILD)/gen/builtin_schedules.c $(BUILD)/gen/default_rules.c
SCHEDULES := $(sort $(wildcard schedules/*.nbs))
LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC)) \
           $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(GEN_SRC))

TESTS    := unit_dsl unit_select unit_reduce unit_interp unit_cache mpi_allreduce mpi_badargs mpi_runtime mpi_collectives \
            mpi_total_reduce mpi_lifecycle mpi_threads mpi_failures unit_hardening mpi_hardening mpi_shm mpi_leave \
            mpi_limits mpi_stall mpi_vectors mpi_topology
EXAMPLES := overlap

STATIC := $(BUILD)/lib/libnbc.a
SHARED := $(BUILD)/lib/libnbc.so
NBCC   := $(BINDIR)/nbcc
# Every object with every symbol, for what is built here and reaches inside (nbcc, the unit
# tests, the kernel benchmark). The installed libraries export only what nbc.h declares.
INTERNAL := $(BUILD)/lib/libnbc-internal.a
EXPORTS  := $(BUILD)/gen/exports.txt
# The interposition library and its tests (see its rule below), for either MPI: MPICH's
# generalized requests with a poll function (MPIX_Grequest_class_create), Open MPI's standard
# ones. Open MPI 4.1 has no MPI-4 persistent collectives: nopersistent.c stands for persistent.c.
INTERPOSE := $(BUILD)/lib/libnbcmpi.so
INTERPOSE_NOT_mpich   := interpose/nopersistent.c
INTERPOSE_NOT_openmpi := interpose/persistent.c
INTERPOSE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out $(INTERPOSE_NOT_$(MPI)),$(sort $(wildcard interpose/*.c))))
INTERPOSE_TESTS := interpose_coll interpose_overlap interpose_hang interpose_types
ANALYSIS := $(BUILD)/lib/libnbc-analysis.a

.PHONY: all demo test install uninstall clean deps docs
all: $(STATIC) $(SHARED) $(NBCC) $(EXAMPLES:%=$(BINDIR)/%) $(TESTS:%=$(BUILD)/tests/%) $(PYFAST) \
     $(INTERPOSE) $(INTERPOSE_TESTS:%=$(BUILD)/tests/%)

# Missing Debian packages are installed once per build directory.
deps: $(call DEPS,deps)
$(BUILD)/.deps: tools/install-deps.sh Makefile
	@mkdir -p $(BUILD)
	@sh tools/install-deps.sh $(PACKAGES)
	@touch $@

$(BUILD)/.test-deps: tools/install-deps.sh Makefile
	@mkdir -p $(BUILD)
	@sh tools/install-deps.sh $(TEST_PACKAGES)
	@touch $@

$(BUILD)/gen/parser.c $(BUILD)/gen/parser.h &: dsl/parser.y | $(call DEPS,deps)
	@mkdir -p $(BUILD)/gen
	bison -Wall --defines=$(BUILD)/gen/parser.h -o $(BUILD)/gen/parser.c $<

$(BUILD)/gen/lexer.c $(BUILD)/gen/lexer.h &: dsl/lexer.l | $(call DEPS,deps)
	@mkdir -p $(BUILD)/gen
	flex --header-file=$(BUILD)/gen/lexer.h -o $(BUILD)/gen/lexer.c $<

# (the folder too: its time changes when a schedule is added or removed, whatever the files' times)
$(BUILD)/gen/builtin_schedules.c: $(SCHEDULES) schedules tools/embed-schedules.sh
	@mkdir -p $(BUILD)/gen
	sh tools/embed-schedules.sh nbc_builtin_schedules nbc_builtin_count $(SCHEDULES) > $@

$(BUILD)/gen/default_rules.c: runtime/default.rules tools/embed-schedules.sh
	@mkdir -p $(BUILD)/gen
	sh tools/embed-schedules.sh nbc_default_rules nbc_default_rules_count runtime/default.rules > $@

# Generated headers must exist before anything includes them.
$(LIB_OBJ) $(ANALYSIS_OBJ): $(BUILD)/gen/parser.h $(BUILD)/gen/lexer.h | $(call DEPS,deps)

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

$(EXPORTS): runtime/nbc.h tools/exports.sh
	@mkdir -p $(dir $@)
	sh tools/exports.sh runtime/nbc.h > $@

# The Python package's compiled calls (nbc._fast, docs/python.md): built with the system's cc for
# the python3 that has mpi4py, into $(BUILD)/python/nbc/, where the package finds it from the
# checkout; no MPI is linked, so either build serves. Skipped with a note when that python3 or
# Python.h (python3-dev, a test package) is missing: the package then runs on ctypes alone.
PYFAST := $(BUILD)/python/.fast
# its own flags: a sanitizer's (make test's builds) would make a module no python3 can load
PYFAST_CFLAGS ?= -O2 -g
$(PYFAST): python/nbc/_fast.c python/build-fast.sh python/find-python.sh
	@mkdir -p $(dir $@)
	@rm -f $(BUILD)/python/nbc/_fast*.so
	@sh python/build-fast.sh $(BUILD)/python "$(WARN) $(PYFAST_CFLAGS)" && if ls $(BUILD)/python/nbc/_fast*.so > /dev/null 2>&1; then touch $@; fi

.PHONY: python
python: $(PYFAST)

$(INTERNAL): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(ANALYSIS): $(ANALYSIS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# One relocatable object whose only global definitions are nbc.h's functions: an application
# may define its own comm_init or cache_create and still link statically. (libnbc-all.o keeps
# every global, for the interposition library, which asks nbc's reduction kernels too.)
$(STATIC): $(LIB_OBJ) $(EXPORTS)
	@mkdir -p $(dir $@)
	rm -f $@
	ld -r -o $(BUILD)/lib/libnbc-all.o $(LIB_OBJ)
	objcopy --keep-global-symbols=$(EXPORTS) $(BUILD)/lib/libnbc-all.o $(BUILD)/lib/libnbc.o
	ar rcs $@ $(BUILD)/lib/libnbc.o

$(SHARED): $(LIB_OBJ) $(EXPORTS)
	@mkdir -p $(dir $@)
	{ echo '{ global:'; sed 's/$$/;/' $(EXPORTS); echo 'local: *; };'; } > $(BUILD)/lib/libnbc.map
	$(CC) -shared -Wl,-soname,libnbc.so.0 -Wl,--version-script=$(BUILD)/lib/libnbc.map -o $@ $(LIB_OBJ) $(LDLIBS)
	ln -sf libnbc.so $(BUILD)/lib/libnbc.so.0

# The interposition library (interpose/, docs/interpose.md): MPI's collective calls on nbc for
# programs not rebuilt (LD_PRELOAD=$(BUILD)/lib/libnbcmpi.so). Its copy of nbc calls PMPI_
# for every MPI function, so that nbc's own waits and receives never come back into the
# wrappers; it exports only the MPI_ functions it defines.
$(INTERPOSE_OBJ): CPPFLAGS += -Iinterpose
$(INTERPOSE): $(INTERPOSE_OBJ) $(STATIC)
	nm -u $(BUILD)/lib/libnbc-all.o | awk '$$2 ~ /^MPI_/ { print $$2 " P" $$2 }' > $(BUILD)/lib/nbcmpi.redefine
	objcopy --redefine-syms=$(BUILD)/lib/nbcmpi.redefine $(BUILD)/lib/libnbc-all.o $(BUILD)/lib/libnbc-pmpi.o
	printf '{ global: MPI_*; local: *; };\n' > $(BUILD)/lib/libnbcmpi.map
	$(CC) -shared -Wl,-soname,libnbcmpi.so.0 -Wl,--version-script=$(BUILD)/lib/libnbcmpi.map -o $@ \
	    $(CFLAGS) $(INTERPOSE_OBJ) $(BUILD)/lib/libnbc-pmpi.o $(LDLIBS) -lpthread
	ln -sf libnbcmpi.so $(BUILD)/lib/libnbcmpi.so.0

# Its tests are plain MPI programs, built without nbc, run with and without the preload.
$(BUILD)/tests/interpose_%: tests/interpose_%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< -lm -o $@

# nbcc: one file per subcommand (tools/nbcc/), with the analysis only it links (analysis/);
# it includes the library's headers by name (CPPFLAGS names every folder).
NBCC_SRC := $(sort $(wildcard tools/nbcc/*.c))
$(NBCC): $(NBCC_SRC) tools/nbcc/nbcc.h $(ANALYSIS) $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -MMD -MP $(NBCC_SRC) $(ANALYSIS) $(INTERNAL) $(LDLIBS) -o $@

$(BINDIR)/%: examples/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(STATIC) $(LDLIBS) -o $@

# These tests count allocations by wrapping malloc at link time.
$(BUILD)/tests/unit_cache $(BUILD)/tests/mpi_runtime: $(BUILD)/tests/%: tests/%.c $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc $< $(INTERNAL) $(LDLIBS) -o $@

# The unit tests reach inside (and mpi_shm, mpi_limits, mpi_topology and mpi_total_reduce read
# the runtime's state); the MPI tests use the library as an application does.
$(BUILD)/tests/unit_%: tests/unit_%.c $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(INTERNAL) $(LDLIBS) -o $@

$(BUILD)/tests/mpi_shm $(BUILD)/tests/mpi_limits $(BUILD)/tests/mpi_topology $(BUILD)/tests/mpi_total_reduce: $(BUILD)/tests/%: tests/%.c $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(INTERNAL) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(STATIC) $(LDLIBS) -o $@

demo: all
	$(MPIEXEC) -n 4 $(BINDIR)/overlap

# The whole suite, then again built with AddressSanitizer and UBSan; the thread tests also
# built with ThreadSanitizer (clang's: gcc 12's crashes at start-up on this kernel).
SANITIZE := $(BUILD)/sanitize
TSAN     := $(BUILD)/tsan
TSAN_CC_mpich   := mpicc.mpich -cc=clang
TSAN_CC_openmpi := OMPI_CC=clang mpicc.openmpi
test: all $(call DEPS,test-deps)
	@$(MAKE) --no-print-directory BUILD=$(SANITIZE) BINDIR=$(SANITIZE)/bin \
	    CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all > $(SANITIZE).log 2>&1 \
	    || { tail -n 30 $(SANITIZE).log; exit 1; }
	@$(MAKE) --no-print-directory BUILD=$(TSAN) BINDIR=$(TSAN)/bin CC="$(TSAN_CC_$(MPI))" \
	    CFLAGS="-O1 -g -fsanitize=thread" $(TSAN)/tests/mpi_threads $(TSAN)/tests/mpi_shm $(TSAN)/tests/mpi_stall $(TSAN)/tests/mpi_total_reduce \
	    $(if $(filter mpich,$(MPI)),$(TSAN)/lib/libnbcmpi.so $(TSAN)/tests/interpose_hang) > $(TSAN).log 2>&1 \
	    || { tail -n 30 $(TSAN).log; exit 1; }
	@$(MAKE) --no-print-directory fuzz > $(FUZZ).log 2>&1 || { tail -n 30 $(FUZZ).log; exit 1; }
	@[ "$(MPI)" = openmpi ] || $(MAKE) --no-print-directory MPI=openmpi build/openmpi/lib/libnbc.so build/openmpi/python/.fast > $(BUILD)/python-lib.log 2>&1 \
	    || echo "building nbc against Open MPI for the Python suite failed ($(BUILD)/python-lib.log): it will be skipped"
	@BUILD=$(BUILD) BINDIR=$(BINDIR) SANITIZE_BUILD=$(SANITIZE) TSAN_BUILD=$(TSAN) FUZZ_BUILD=$(FUZZ) sh tests/run.sh

# The benchmark (bench/): nbc against MPICH on P processes (make bench P=4), results in
# bench/results/; side by side with Gloo (bench/gloo.cc, C++: libgloo-dev and g++ are the
# bench's, not the library's) and, with MPICH as the MPI, with Open MPI: the bench is also built
# against it (its own build, as make MPI=openmpi). Its own tools are installed on first use;
# `make test` needs none of them.
BENCH_PACKAGES := gnuplot-nox valgrind libgloo-dev g++
BENCH_PROGS := $(BUILD)/bench/bench $(BUILD)/bench/kernels $(BUILD)/bench/cgcall $(BUILD)/bench/loop $(BUILD)/bench/gloo \
    $(BUILD)/bench/collectives
# with MPICH, the interposition library's column too (bench/interpose.sh)
BENCH_PROGS += $(if $(filter mpich,$(MPI)),$(BUILD)/bench/interpose_cost $(INTERPOSE))
BENCH_OPENMPI := $(if $(filter mpich,$(MPI)),bench-openmpi)
P ?= 2
.PHONY: bench bench-openmpi
bench: all $(BENCH_PROGS) $(call DEPS,bench-deps) $(BENCH_OPENMPI)
	OMPI_BUILD=$(BUILD_openmpi) sh bench/run.sh $(BINDIR) $(BUILD) $(P)

bench-openmpi:
	@$(MAKE) --no-print-directory MPI=openmpi BUILD=$(BUILD_openmpi) BINDIR=$(BUILD_openmpi)/bin \
	    $(BUILD_openmpi)/bench/bench $(BUILD_openmpi)/bench/collectives

# All-to-all, gather and scan beside MPICH's and Open MPI's calls (bench/collectives.sh), the
# rows `make bench` also runs
.PHONY: bench-collectives
bench-collectives: all $(BUILD)/bench/collectives $(BENCH_OPENMPI)
	OMPI_BUILD=$(BUILD_openmpi) sh bench/collectives.sh $(BINDIR) $(BUILD) $(P)

# The interposition library's column (bench/interpose.sh): MPI_Iallreduce through the preload
# next to nbc_iallreduce and MPICH's own, and the per-call cost of the interposition.
.PHONY: bench-interpose
bench-interpose: $(BUILD)/bench/bench $(BUILD)/bench/interpose_cost $(INTERPOSE) $(call DEPS,bench-deps)
	sh bench/interpose.sh $(BUILD) $(P)

# Jobs that span nodes (bench/hierarchy.sh): allreduce_nodes against the best flat schedule and
# MPICH's MPI_Allreduce on 2 namespace hosts x 2 ranks over 1 Gbit/s links, both placements,
# beside the calibrated two-level model's predictions. As root; results in bench/results/hierarchy/.
.PHONY: bench-hierarchy
bench-hierarchy: all $(BUILD)/bench/bench
	BUILD=$(BUILD) BINDIR=$(BINDIR) sh bench/hierarchy.sh

# The training-step benchmark (bench/training.c, docs/total-reduce.md): every way of reducing
# ResNet-50's and BERT-base's gradients in one run, at P processes (make bench-training P=4).
# TRAINING_ARGS adds options to bench/training.
.PHONY: bench-training
bench-training: $(BUILD)/bench/training $(BUILD)/.bench-deps
	sh bench/training.sh $(BUILD) $(P)

# PyTorch at p = 2 (bench/torch.sh, docs/python.md): ResNet-18's iteration time with no
# communication, DDP with Gloo, DDP with nbc's hook and nbc's Total Reduce synchronizer, on nbc
# built against Open MPI (the MPI Debian's mpi4py and torch run on).
.PHONY: bench-torch bench-python
# The cost of one call from Python (bench/python_calls.py, docs/python.md): an 8-byte allreduce
# through mpi4py, nbc._fast and ctypes, taking turns in one run, at p = 1 (the call alone) and
# p = P (default 2), with Open MPI's default busy polling (yielding adds the scheduler's delays).
bench-python: $(call DEPS,test-deps)
	@$(MAKE) --no-print-directory MPI=openmpi build/openmpi/lib/libnbc.so build/openmpi/python/.fast
	@py=$$(for c in $$(which -a python3); do $$c -c 'import mpi4py, numpy' 2>/dev/null && { echo $$c; break; }; done); \
	for n in 1 $(P); do OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=0 \
	    mpiexec.openmpi --oversubscribe -n $$n $$py bench/python_calls.py || exit 1; done
bench-torch: $(call DEPS,test-deps) $(call DEPS,bench-deps)
	@$(MAKE) --no-print-directory MPI=openmpi build/openmpi/lib/libnbc.so build/openmpi/python/.fast
	sh bench/torch.sh bench/results

$(BUILD)/.bench-deps: tools/install-deps.sh Makefile
	@mkdir -p $(BUILD)
	@sh tools/install-deps.sh $(BENCH_PACKAGES)
	@touch $@

$(BUILD)/bench/%: bench/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(STATIC) $(LDLIBS) -o $@

$(BUILD)/bench/bench: bench/shm.h bench/stats.h

# MPI's C++ bindings are not used (and Open MPI's trip -Wextra): *_SKIP_MPICXX.
$(BUILD)/bench/gloo: bench/gloo.cc bench/stats.h $(STATIC) | $(call DEPS,bench-deps)
	@mkdir -p $(dir $@)
	mpicxx.$(MPI) -std=c++17 $(WARN) $(CFLAGS) -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -Iruntime $< $(STATIC) -lgloo $(LDLIBS) -o $@

$(BUILD)/bench/kernels: bench/kernels.c $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) $< $(INTERNAL) $(LDLIBS) -o $@

# Fuzzing with clang's libFuzzer (ASan and UBSan): `make fuzz` builds the drivers of
# tests/fuzz/ (a schedule file through parser, compiler and verifier; a rule file through the
# rule loader and matcher); `make fuzz-test` runs each for FUZZ_TIME seconds from the seed
# corpus (the shipped schedules and rules) and prints ok/FAIL lines.
FUZZ          := $(BUILD)/fuzz
FUZZ_TIME     ?= 20
FUZZ_PACKAGES := clang libclang-rt-14-dev
FUZZ_FLAGS     = -std=gnu11 $(WARN) -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all $(CPPFLAGS)
FUZZ_OBJ      := $(patsubst %.c,$(FUZZ)/obj/%.o,$(sort $(wildcard dsl/*.c compiler/*.c)) runtime/selection.c) \
                 $(patsubst $(BUILD)/gen/%.c,$(FUZZ)/obj/gen/%.o,$(GEN_SRC))
FUZZERS       := $(FUZZ)/fuzz_schedule $(FUZZ)/fuzz_rules
.PHONY: fuzz fuzz-test
fuzz: $(FUZZERS)
fuzz-test: $(FUZZERS)
	@sh tests/fuzz/run.sh $(FUZZ) $(FUZZ_TIME)

$(BUILD)/.fuzz-deps: tools/install-deps.sh
	@mkdir -p $(BUILD)
	@sh tools/install-deps.sh $(FUZZ_PACKAGES)
	@touch $@

$(FUZZ_OBJ): $(BUILD)/gen/parser.h $(BUILD)/gen/lexer.h | $(BUILD)/.fuzz-deps

$(FUZZ)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -Wno-unused-function -Wno-sign-compare -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ)/%: tests/fuzz/%.c $(FUZZ_OBJ)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJ) $(LDLIBS) -o $@

# Tables in docs/ that are read off the compiled programs.
docs: $(NBCC)
	sh tools/algorithms-table.sh $(NBCC) > docs/algorithms.md

SUBST = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@MPI_PC@|$(MPI_PC_$(MPI))|' \
            -e 's|@MPICC@|$(CC)|'
CMAKEDIR = $(DESTDIR)$(PREFIX)/lib/cmake/nbc
# The Python package (python/nbc): where Debian's python3 looks for a PREFIX's modules.
PYTHONDIR ?= $(PREFIX)/lib/python3/dist-packages
install: all
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/share/nbc/schedules $(CMAKEDIR)
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/libnbc.so.0
	ln -sf libnbc.so.0 $(DESTDIR)$(PREFIX)/lib/libnbc.so
	install -m 644 runtime/nbc.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(NBCC) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(SCHEDULES) $(DESTDIR)$(PREFIX)/share/nbc/schedules/
	$(SUBST) tools/nbc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/nbc.pc
	$(SUBST) tools/nbcConfig.cmake.in > $(CMAKEDIR)/nbcConfig.cmake
	$(SUBST) tools/nbcConfigVersion.cmake.in > $(CMAKEDIR)/nbcConfigVersion.cmake
	install -m 755 $(INTERPOSE) $(DESTDIR)$(PREFIX)/lib/libnbcmpi.so.0
	ln -sf libnbcmpi.so.0 $(DESTDIR)$(PREFIX)/lib/libnbcmpi.so
	$(SUBST) interpose/nbcmpi.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/nbcmpi.pc
	install -d $(DESTDIR)$(PYTHONDIR)/nbc
	install -m 644 python/nbc/*.py $(DESTDIR)$(PYTHONDIR)/nbc/
	for f in $(BUILD)/python/nbc/_fast*.so; do [ ! -f "$$f" ] || install -m 755 "$$f" $(DESTDIR)$(PYTHONDIR)/nbc/; done
	printf '# written by make install: where libnbc.so.0 is, and the MPI it is built against\nLIBDIR = "%s"\nMPI = "%s"\n' \
	    '$(PREFIX)/lib' '$(MPI)' > $(DESTDIR)$(PYTHONDIR)/nbc/_installed.py

# Removes what install wrote (directories only when left empty).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libnbc.a $(DESTDIR)$(PREFIX)/lib/libnbc.so $(DESTDIR)$(PREFIX)/lib/libnbc.so.0 \
	    $(DESTDIR)$(PREFIX)/include/nbc.h $(DESTDIR)$(PREFIX)/bin/nbcc $(DESTDIR)$(PREFIX)/lib/pkgconfig/nbc.pc \
	    $(DESTDIR)$(PREFIX)/lib/libnbcmpi.so $(DESTDIR)$(PREFIX)/lib/libnbcmpi.so.0 $(DESTDIR)$(PREFIX)/lib/pkgconfig/nbcmpi.pc \
	    $(CMAKEDIR)/nbcConfig.cmake $(CMAKEDIR)/nbcConfigVersion.cmake \
	    $(addprefix $(DESTDIR)$(PREFIX)/share/nbc/schedules/,$(notdir $(SCHEDULES)))
	rm -rf $(DESTDIR)$(PYTHONDIR)/nbc
	-rmdir $(DESTDIR)$(PREFIX)/share/nbc/schedules $(DESTDIR)$(PREFIX)/share/nbc $(CMAKEDIR) \
	    $(DESTDIR)$(PREFIX)/lib/cmake 2> /dev/null

clean:
	rm -rf build bin

-include $(shell find $(BUILD)/obj $(FUZZ)/obj -name '*.d' 2>/dev/null)
