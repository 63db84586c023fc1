# tpuloop — build, test, fuzz, bench and install.
#
#   make run       install what is missing, build, run the main job
#   make test      install what is missing, build, run the whole suite, then the
#                  suite again under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz      short smoke run of every fuzz target (FUZZ_SECONDS each)
#   make bench     build and run the benchmarks
#   make install   PREFIX=/usr/local: headers, libraries, tpuloop.pc, the command
#
# Outputs go under $(BUILD) (build/ by default; build/asan for the sanitizer
# run, build/fuzz for the fuzzers), so the variants never mix objects.

PREFIX   ?= /usr/local
BUILD    ?= build
SAN      ?=
CC       ?= cc
FUZZ_CC  ?= clang
FUZZ_SECONDS ?= 30
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)

PKGS     := jansson openblas zlib libmd libprotobuf-c
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Open MPI: only src/comm/comm_mpi.c sees mpi.h; everything links libmpi.
MPI_PKG    := ompi-c
MPI_CFLAGS := $(shell pkg-config --cflags $(MPI_PKG) 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs $(MPI_PKG) 2>/dev/null)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wformat=2 -Wvla
OPT      ?= -O2 -g
# The element-wise kernels (optimizer updates, activations) are plain loops
# left to the vectoriser. GCC needs -fno-math-errno to vectorise sqrtf (else
# it may set errno), and at -O2 its "very cheap" cost model declines loops of
# unknown length. Neither changes a result: ISO C mode keeps -ffp-contract=off,
# and vector sqrt and division round exactly as the scalar ones.
VEC      := -fno-math-errno -fvect-cost-model=dynamic
CFLAGS_BASE := -std=c11 $(WARN) $(OPT) $(VEC) -fPIC -fvisibility=hidden -pthread \
            -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc -I$(BUILD)/gen $(PKG_CFLAGS)
# The command, the job layer and the built-in models see the public headers
# only: what they do, a user's program can do.
CFLAGS_CLI  = $(filter-out -Isrc -I$(BUILD)/gen,$(CFLAGS_BASE))
ifeq ($(SAN),1)
CFLAGS_BASE += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDSAN       := -fsanitize=address,undefined
endif
ifeq ($(SAN),thread)
CFLAGS_BASE += -fsanitize=thread -fno-omit-frame-pointer
LDSAN       := -fsanitize=thread
endif
# oneDNN (Debian's libdnnl-dev 2.6, no pkg-config file) runs the vision
# kernels (src/kernels/conv.h); libgomp is its OpenMP runtime, which
# src/kernels/vision_dnnl.c calls to keep it to one thread per device.
DNNL_LIBS   := -ldnnl -lgomp
LDLIBS_ALL  := $(PKG_LIBS) $(MPI_LIBS) $(DNNL_LIBS) -pthread -lm

# C for tpuloop's own .proto files (proto/<package>/x.proto), made by protoc-c
# under $(BUILD)/gen and included as "<package>/x.pb-c.h".
PROTOC_C ?= protoc-c
PROTO_SRC := $(sort $(wildcard proto/*/*.proto))
GEN_SRC  := $(PROTO_SRC:proto/%.proto=$(BUILD)/gen/%.pb-c.c)
GEN_HDR  := $(GEN_SRC:.c=.h)
GEN_OBJ  := $(GEN_SRC:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)
LIB_SRC  := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN_OBJ)
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(sort $(wildcard tests/*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
BENCH_PEERS  := bench/run_peers.sh
BENCH_PYTHON ?= /usr/bin/python3
BENCH_LOG    := $(BUILD)/bench/results.jsonl
HEADERS  := $(sort $(wildcard include/tpuloop/*.h))
# Programs a user could copy (examples/*.c), built as the command is: public
# headers only, against the static library; tests/test_examples.c runs them.
EXAMPLES_SRC := $(sort $(wildcard examples/*.c))
EXAMPLES_BIN := $(EXAMPLES_SRC:examples/%.c=$(BUILD)/examples/%)

STATIC   := $(BUILD)/lib/libtpuloop.a
SOVER    := 0
SHARED   := $(BUILD)/lib/libtpuloop.so.$(SOVER)
CLI      := $(BUILD)/bin/tpuloop
TESTS    := $(BUILD)/tests/tpuloop_tests
# Programs that tests start under mpirun (tests/mpi/*.c).
MPI_PROGS := $(patsubst tests/mpi/%.c,$(BUILD)/tests/mpi_%,$(sort $(wildcard tests/mpi/*.c)))

.PHONY: all lib deps build run test check unit python-test asan-unit tsan tsan-unit symbols install-check \
        fuzz fuzz-build bench install uninstall clean FORCE

all: lib $(CLI) $(TESTS) $(MPI_PROGS) $(BENCH_BIN) $(EXAMPLES_BIN)

lib: $(STATIC) $(SHARED)

deps:
	@./scripts/install-deps

# A recursive make after deps, so that pkg-config runs once the packages exist.
build: deps
	@$(MAKE) --no-print-directory all

# The main job: the MLP 784-256-256-10 on Fashion-MNIST on every device of
# the machine, then its test accuracy and params_digest.
run: deps
	@$(MAKE) --no-print-directory $(CLI)
	$(CLI) devices
	$(CLI) train configs/mlp_fashion_mnist.json

test: deps
	@$(MAKE) --no-print-directory check

check: all symbols install-check unit python-test
	@$(MAKE) --no-print-directory BUILD=build/tsan SAN=thread OPT="-O1 -g" tsan-unit
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 OPT="-O1 -g" asan-unit

unit: $(TESTS) $(CLI) $(MPI_PROGS) $(EXAMPLES_BIN)
	TPULOOP_CLI=$(abspath $(CLI)) TPULOOP_EXAMPLES=$(abspath $(BUILD)/examples) $(TESTS) --jobs=$(JOBS)

# The Python package (python/tpuloop: ctypes over this build's libtpuloop.so)
# and its pytest suite, with Debian's python3-pytest and python3-numpy.
PYTHON ?= /usr/bin/python3
PYVER  := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYDIR  ?= $(PREFIX)/lib/python$(PYVER)/dist-packages

python-test: lib $(CLI)
	@echo "== the Python package (python/tests) =="
	cd python/tests && PYTHONDONTWRITEBYTECODE=1 TPULOOP_LIBRARY=$(abspath $(SHARED)) \
	    TPULOOP_CLI=$(abspath $(CLI)) $(PYTHON) -m pytest -q -p no:cacheprovider </dev/null

# Under ASan + UBSan; the last line printed is the test framework's summary.
# Criterion passes a test whose worker process LeakSanitizer reports at exit,
# so the log is searched for sanitizer reports too.
asan-unit: $(TESTS) $(CLI) $(MPI_PROGS) $(EXAMPLES_BIN)
	@echo "== the suite again under AddressSanitizer + UndefinedBehaviorSanitizer =="
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	TPULOOP_CLI=$(abspath $(CLI)) TPULOOP_EXAMPLES=$(abspath $(BUILD)/examples) $(TESTS) --jobs=$(JOBS) \
	    > $(BUILD)/asan-tests.log 2>&1; rc=$$?; \
	if grep -q -E 'ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:' $(BUILD)/asan-tests.log; then \
	    cat $(BUILD)/asan-tests.log; echo "asan-unit: the sanitizers reported errors (see above)"; exit 1; \
	fi; \
	cat $(BUILD)/asan-tests.log; exit $$rc

# The threaded tests (tests/test_mt_*.c) under ThreadSanitizer. Criterion
# cannot start under TSan (Snaipe/Criterion#274), so the same test files are
# built against a small stand-in for its macros (tests/tsan/) and run in one
# process.
MT_SRC   := $(sort $(wildcard tests/test_mt_*.c))
TSAN_BIN := $(BUILD)/tests/tpuloop_mt_tests

tsan: deps
	@$(MAKE) --no-print-directory BUILD=build/tsan SAN=thread OPT="-O1 -g" tsan-unit

# Linked every time: a removed test file must leave the binary too.
$(TSAN_BIN): $(MT_SRC) tests/tsan/runner.c tests/tsan/criterion/criterion.h $(STATIC) FORCE
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS_BASE) -Itests/tsan $(LDSAN) -o $@ $(MT_SRC) tests/tsan/runner.c $(STATIC) $(LDLIBS_ALL)

# Then the estimator over 2 MPI processes (tests/tsan/mpi.sh): the threads
# of each host beside MPI's.
tsan-unit: $(TSAN_BIN) $(BUILD)/tests/mpi_estimator_check $(CLI)
	@echo "== threaded tests (tests/test_mt_*.c) under ThreadSanitizer =="
	@TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(TSAN_BIN) > $(BUILD)/tsan-tests.log 2>&1; rc=$$?; \
	cat $(BUILD)/tsan-tests.log; \
	if grep -q 'WARNING: ThreadSanitizer' $(BUILD)/tsan-tests.log; then \
	    echo "tsan-unit: ThreadSanitizer reported races (see above)"; exit 1; \
	fi; [ $$rc = 0 ] || exit $$rc
	@echo "== 2 hosts (MPI processes) of 2 replicas under ThreadSanitizer =="
	@sh tests/tsan/mpi.sh $(BUILD) > $(BUILD)/tsan-mpi.log 2>&1; rc=$$?; \
	if [ $$rc != 0 ] || grep -q 'WARNING: ThreadSanitizer' $(BUILD)/tsan-mpi.log; then \
	    cat $(BUILD)/tsan-mpi.log; echo "tsan-unit: the multi-host runs failed or raced (see above)"; exit 1; \
	fi; grep -c '"params_digest"\|: digest ' $(BUILD)/tsan-mpi.log | sed 's/^/tsan-unit: multi-host runs passed, digests: /'

# Only tl_* symbols leave the shared library.
symbols: $(SHARED)
	@bad=$$(nm -D --defined-only $(SHARED) | awk '$$2 ~ /^[TDBRV]$$/ {print $$3}' | grep -v '^tl_' || true); \
	if [ -n "$$bad" ]; then echo "symbols: not tl_* but exported:"; echo "$$bad"; exit 1; fi; \
	echo "symbols: $$(nm -D --defined-only $(SHARED) | grep -c ' T tl_') exported, all tl_*"

# Installs into a scratch prefix and builds a program against tpuloop.pc.
install-check: lib
	@rm -rf $(BUILD)/install-check && mkdir -p $(BUILD)/install-check
	@$(MAKE) --no-print-directory install PREFIX=$(abspath $(BUILD)/install-check/prefix) >/dev/null
	@printf '#include <tpuloop/tpuloop.h>\n#include <stdio.h>\nint main(void){tl_config *c; if (tl_config_create(&c)) return 1; printf("%%s\\n", tl_strerror(TL_EINVAL)); tl_config_destroy(c); return 0;}\n' > $(BUILD)/install-check/use.c
	@PKG_CONFIG_PATH=$(abspath $(BUILD)/install-check/prefix)/lib/pkgconfig; export PKG_CONFIG_PATH; \
	$(CC) -std=c11 -Wall -Werror $(BUILD)/install-check/use.c -o $(BUILD)/install-check/use \
	    $$(pkg-config --cflags --libs tpuloop) -Wl,-rpath,$(abspath $(BUILD)/install-check/prefix)/lib && \
	$(BUILD)/install-check/use >/dev/null && echo "install-check: pkg-config tpuloop builds and runs a program"
	@cd / && PYTHONDONTWRITEBYTECODE=1 TPULOOP_LIBRARY= \
	    PYTHONPATH=$(abspath $(BUILD)/install-check/prefix)/lib/python$(PYVER)/dist-packages $(PYTHON) -c \
	    'import tpuloop._lib as l; p = l._find_library(); assert p.startswith("$(abspath $(BUILD)/install-check)"), p; \
	    print("install-check: import tpuloop loads", p)'

# V=1 shows the full commands.
Q := $(if $(V),,@)

# Objects depend on the compiler and its flags too: the stamp is rewritten
# only when they change (a flag such as -fno-math-errno changes the code).
FLAGS_STAMP := $(BUILD)/cflags.stamp
$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CFLAGS_BASE)' | cmp -s - $@ 2>/dev/null || echo '$(CC) $(CFLAGS_BASE)' > $@

CFLAGS_OBJ = $(CFLAGS_BASE)
$(BUILD)/obj/%.o: %.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS_OBJ) -MMD -MP -c $< -o $@

$(BUILD)/obj/src/cli/%.o $(BUILD)/obj/src/job/%.o $(BUILD)/obj/src/models/%.o: CFLAGS_OBJ = $(CFLAGS_CLI)
$(BUILD)/obj/src/comm/comm_mpi.o: CFLAGS_OBJ = $(CFLAGS_BASE) $(MPI_CFLAGS)

# One protoc-c run makes both files (a grouped pattern rule). Every object
# waits for the generated headers; its .d file then records which it uses.
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	@$(if $(V),,echo "  PROTOC  $<")
	$(Q)$(PROTOC_C) --c_out=$(BUILD)/gen -Iproto $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS_BASE) -MMD -MP -c $< -o $@

$(LIB_OBJ) $(CLI_OBJ) $(TEST_OBJ): | $(GEN_HDR)
# Kept after a build: make would delete them as intermediates of the fuzz rule.
.SECONDARY: $(GEN_SRC) $(GEN_HDR)

$(STATIC): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,libtpuloop.so.$(SOVER) $(LDSAN) -o $@ $^ $(LDLIBS_ALL)
	$(Q)ln -sf libtpuloop.so.$(SOVER) $(BUILD)/lib/libtpuloop.so

$(CLI): $(CLI_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  LD      $@")
	$(Q)$(CC) $(LDSAN) -o $@ $(CLI_OBJ) $(STATIC) $(LDLIBS_ALL)

$(TESTS): $(TEST_OBJ) $(STATIC) FORCE
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  LD      $@")
	$(Q)$(CC) $(LDSAN) -o $@ $(TEST_OBJ) $(STATIC) -lcriterion $(LDLIBS_ALL)

$(BUILD)/tests/mpi_%: tests/mpi/%.c $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS_BASE) $(LDSAN) -o $@ $< $(STATIC) $(LDLIBS_ALL)

$(BUILD)/examples/%: examples/%.c $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS_CLI) $(LDSAN) -o $@ $< $(STATIC) $(LDLIBS_ALL)

$(BUILD)/bench/%: bench/%.c bench/util/bench_util.c bench/util/bench_util.h $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS_BASE) $(MPI_CFLAGS) -Ibench $(LDSAN) -o $@ $< bench/util/bench_util.c $(STATIC) $(LDLIBS_ALL)

# Every figure is one JSON line (the median of its repetitions): tpuloop's
# benches, then the PyTorch peers (bench/run_peers.sh), then one summary line
# with the ratios (bench/summary.py). All lines are kept in $(BENCH_LOG).
bench: deps
	@$(MAKE) --no-print-directory $(BENCH_BIN)
	@mkdir -p $(dir $(BENCH_LOG)) && : > $(BENCH_LOG)
	@for b in $(BENCH_BIN); do \
	    { $$b; echo $$? > $(BENCH_LOG).rc; } | tee -a $(BENCH_LOG); rc=$$(cat $(BENCH_LOG).rc); \
	    if [ "$$rc" != 0 ]; then echo "bench: $$b failed (rc=$$rc)"; exit 1; fi; \
	done; rm -f $(BENCH_LOG).rc
	@TPULOOP_BENCH_MODELS=$(abspath $(BUILD)/bench/bench_models) $(BENCH_PEERS) | tee -a $(BENCH_LOG)
	@$(MAKE) --no-print-directory lib $(CLI)
	@TPULOOP_LIBRARY=$(abspath $(SHARED)) $(BENCH_PYTHON) bench/python_front_end.py $(abspath $(CLI)) | tee -a $(BENCH_LOG)
	@$(BENCH_PYTHON) bench/summary.py $(BENCH_LOG) || echo '{"bench": "summary", "skipped": "$(BENCH_PYTHON) failed"}'

# libFuzzer targets, built with clang in their own tree.
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=build/fuzz/%)
FUZZ_FLAGS := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
              -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc -I$(BUILD)/gen $(PKG_CFLAGS)

build/fuzz/%: fuzz/%.c $(LIB_SRC) $(GEN_SRC) $(GEN_HDR) $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(MPI_CFLAGS) -o $@ $< $(LIB_SRC) $(GEN_SRC) $(PKG_LIBS) $(MPI_LIBS) $(DNNL_LIBS) -pthread -lm

fuzz-build: $(FUZZ_BIN)

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	@for f in $(FUZZ_BIN); do \
	    name=$$(basename $$f); mkdir -p build/fuzz/corpus-$$name; \
	    echo "== $$name for $(FUZZ_SECONDS)s =="; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -dict=fuzz/$$name.dict \
	        build/fuzz/corpus-$$name fuzz/seeds/$$name > build/fuzz/$$name.log 2>&1; rc=$$?; \
	    grep -E '^(stat::|Done|==[0-9]+==ERROR|SUMMARY)' build/fuzz/$$name.log; \
	    if [ $$rc -ne 0 ]; then tail -n 40 build/fuzz/$$name.log; echo "$$name: failed (rc=$$rc)"; exit 1; fi; \
	done

install: lib
	install -d $(DESTDIR)$(PREFIX)/include/tpuloop $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(HEADERS) $(DESTDIR)$(PREFIX)/include/tpuloop/
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtpuloop.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libtpuloop.so
	@if [ -f $(CLI) ]; then install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/; fi
	cd python && find tpuloop -name '*.py' | while read f; do \
	    install -D -m 644 $$f $(DESTDIR)$(PYDIR)/$$f || exit 1; done
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/^#define TL_VERSION_STRING "\(.*\)"/\1/p' include/tpuloop/base.h)|g' \
	    -e 's|@PKGS@|$(PKGS) $(MPI_PKG)|g' tpuloop.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tpuloop.pc

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/tpuloop $(DESTDIR)$(PREFIX)/lib/libtpuloop.* \
	       $(DESTDIR)$(PREFIX)/lib/pkgconfig/tpuloop.pc $(DESTDIR)$(PREFIX)/bin/tpuloop $(DESTDIR)$(PYDIR)/tpuloop

clean:
	rm -rf build

FORCE:

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
