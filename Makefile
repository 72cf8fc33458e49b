# netio-trace: build, test, run, bench.  See README.md and DEVELOPERS.md.
# BUILD can be overridden so that parallel work does not share one build tree.
BUILD     ?= build
CLANG     ?= $(shell command -v clang-16 || command -v clang-19 || command -v clang)
BPFTOOL   ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
CC        ?= gcc
CFLAGS    ?= -O2 -g
CFLAGS    += -Wall -Wextra -std=gnu11 -D_GNU_SOURCE
PYTHON    := .venv/bin/python
# BPF_DEFS: extra -D flags for the BPF objects (a debug build, such as the one on the git
# branch wip-shortfall-debug)
BPF_DEFS  ?=
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_SKELS  := $(patsubst bpf/%.bpf.c,$(BUILD)/include/%.skel.h,$(BPF_SRCS))
# every object also in its compat build, for kernels before 5.17 (bpf/compat.bpf.h)
BPF_COMPAT_SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/include/%.compat.skel.h,$(BPF_SRCS))
COMMON_SRCS := $(wildcard common/*.c)
COMMON_OBJS := $(patsubst common/%.c,$(BUILD)/common/%.o,$(COMMON_SRCS))
USER_SRCS  := $(wildcard user/*.c)
USER_OBJS  := $(patsubst user/%.c,$(BUILD)/user/%.o,$(USER_SRCS))
WL_LIB_SRCS := $(filter-out workloads/server.c workloads/client.c,$(wildcard workloads/*.c))
WL_LIB_OBJS := $(patsubst workloads/%.c,$(BUILD)/workloads/%.o,$(WL_LIB_SRCS))
UNIT_SRCS  := $(wildcard tests/unit/*.c)
# blazesym-c, the tracer's symbolizer: built by scripts/blazesym.sh from third_party/blazesym
# (pinned by its Cargo.lock), linked statically with the system libraries it needs (what
# `cargo rustc -- --print native-static-libs` lists)
BLAZESYM_DIR  := third_party/blazesym/target
BLAZESYM_LIB  := $(BLAZESYM_DIR)/release/libnetio_blazesym.a
BLAZESYM_HDR  := $(BLAZESYM_DIR)/include/blazesym.h
BLAZESYM_LIBS := $(BLAZESYM_LIB) -lgcc_s -lutil -lrt -lpthread -lm -ldl
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
# programs of our own that the tracer was not built around (tests/integration/test_programs.py)
PROG_SRCS  := $(wildcard tests/programs/*.c)
PROG_BINS  := $(patsubst tests/programs/%.c,$(BUILD)/tests/programs/%,$(PROG_SRCS))

TARGETS := $(BUILD)/netio-server $(BUILD)/netio-client $(BUILD)/netio-busy-loop \
           $(BUILD)/netio-getpid-loop $(BUILD)/netio-churn
ifneq ($(BPF_SRCS),)
TARGETS += $(BUILD)/netio-tracer $(BUILD)/netio-bench-floor $(BUILD)/netio-bench-tcp-counters
endif

.PHONY: all deps run test unittest pytest vmtest soak bench clean
# run, test and bench need root (BPF, namespaces): as another user they re-run themselves with
# sudo, so README's two commands are the same for root and for a sudo user.
AS_ROOT := $(if $(filter 0,$(shell id -u)),,sudo)
.DELETE_ON_ERROR:
# keep the BPF objects and skeletons (intermediates) so a second make has nothing to do
.SECONDARY:

all: $(TARGETS) $(UNIT_BINS) $(PROG_BINS)

deps:
	@./scripts/deps.sh

# ---- C both the tracer and the workloads build from (common/) --------------
$(BUILD)/common/%.o: common/%.c $(wildcard common/*.h) | $(BUILD)/common
	$(CC) $(CFLAGS) -fno-omit-frame-pointer -Icommon -c $< -o $@

# ---- workloads -----------------------------------------------------------
# Frame pointers keep the workloads' user stacks whole for the sampler: the profiler walks
# them to attribute each sample to the copy that called it.
$(BUILD)/workloads/%.o: workloads/%.c $(wildcard workloads/*.h) $(wildcard common/*.h) | $(BUILD)/workloads
	$(CC) $(CFLAGS) -fno-omit-frame-pointer -Iworkloads -Icommon -c $< -o $@

$(BUILD)/netio-server: $(BUILD)/workloads/server.o $(WL_LIB_OBJS) $(COMMON_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ -lpthread -luring

$(BUILD)/netio-client: $(BUILD)/workloads/client.o $(WL_LIB_OBJS) $(COMMON_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ -lpthread -luring

# the bench's timer floor: computation only (bench/busy_loop.c)
$(BUILD)/netio-busy-loop: bench/busy_loop.c bench/loops.h | $(BUILD)/workloads
	$(CC) $(CFLAGS) -fno-omit-frame-pointer $< -o $@

# unrelated syscalls only: what a hook on every syscall costs (bench/getpid_loop.c)
$(BUILD)/netio-getpid-loop: bench/getpid_loop.c bench/loops.h | $(BUILD)/workloads
	$(CC) $(CFLAGS) $< -o $@

# thousands of short-lived processes, threads and TCP connections: the churn bench's load
# (bench/churn.c, bench/churn.py)
$(BUILD)/netio-churn: bench/churn.c bench/loops.h | $(BUILD)/workloads
	$(CC) $(CFLAGS) $< -o $@ -lpthread

# ---- BPF and the tracer --------------------------------------------------
# vmlinux.h comes from the running kernel's BTF; CO-RE relocates it elsewhere.
$(BUILD)/include/vmlinux.h: | $(BUILD)/include
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(BUILD)/include/vmlinux.h | $(BUILD)/bpf
	$(CLANG) -g -O2 -Wall -target bpf -D__TARGET_ARCH_$(ARCH) $(BPF_DEFS) -I$(BUILD)/include -Ibpf -c $< -o $@

$(BUILD)/bpf/%.compat.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(BUILD)/include/vmlinux.h | $(BUILD)/bpf
	$(CLANG) -g -O2 -Wall -target bpf -D__TARGET_ARCH_$(ARCH) $(BPF_DEFS) -DNETIO_COMPAT -I$(BUILD)/include -Ibpf -c $< -o $@

$(BUILD)/include/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@

# The tracer opens a compat build through its object's skeleton (user/attach.c): the two must
# hold the same programs, maps and data layout (scripts/check-compat-skel.sh).
$(BUILD)/include/%.compat.skel.h: $(BUILD)/bpf/%.compat.bpf.o $(BUILD)/include/%.skel.h scripts/check-compat-skel.sh
	$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_compat_bpf > $@.tmp
	scripts/check-compat-skel.sh $(BUILD)/include/$*.skel.h $@.tmp
	mv $@.tmp $@

$(BUILD)/user/%.o: user/%.c $(wildcard user/*.h) $(wildcard common/*.h) bpf/netio.h $(BPF_SKELS) $(BPF_COMPAT_SKELS) $(BLAZESYM_HDR) | $(BUILD)/user
	$(CC) $(CFLAGS) -I$(BUILD)/include -I$(BLAZESYM_DIR)/include -Ibpf -Iuser -Icommon -c $< -o $@

$(BUILD)/netio-tracer: $(USER_OBJS) $(COMMON_OBJS) $(BLAZESYM_LIB)
	$(CC) $(CFLAGS) $(USER_OBJS) $(COMMON_OBJS) -o $@ -lbpf -lelf -lz $(BLAZESYM_LIBS)

# the empty-program floor beside the tracer's programs (bpf/floor.bpf.c, bench/floor.py); the
# tracer never loads that object
$(BUILD)/netio-bench-floor: bench/floor.c $(BUILD)/include/floor.skel.h $(BUILD)/common/sysctl.o | $(BUILD)/workloads
	$(CC) $(CFLAGS) -I$(BUILD)/include -Icommon $< $(BUILD)/common/sysctl.o -o $@ -lbpf -lelf -lz

# the kernel's per-socket TCP counters read by an iterator (bpf/tcp_counters.bpf.c,
# bench/tcp_counters.py); the tracer never loads that object
$(BUILD)/netio-bench-tcp-counters: bench/tcp_counters.c $(BUILD)/include/tcp_counters.skel.h | $(BUILD)/workloads
	$(CC) $(CFLAGS) -I$(BUILD)/include $< -o $@ -lbpf -lelf -lz

$(BLAZESYM_LIB) $(BLAZESYM_HDR) &: third_party/blazesym/Cargo.toml third_party/blazesym/Cargo.lock third_party/blazesym/src/lib.rs
	./scripts/blazesym.sh

# ---- tests ---------------------------------------------------------------
SYMBOLIZE_OBJS := $(BUILD)/user/frames.o $(BUILD)/user/trace_helpers.o
$(BUILD)/tests/test_symbolize: tests/unit/test_symbolize.c $(SYMBOLIZE_OBJS) $(BLAZESYM_LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Iuser $< $(SYMBOLIZE_OBJS) -o $@ -lbpf -lelf $(BLAZESYM_LIBS)

$(BUILD)/tests/test_irqframes: tests/unit/test_irqframes.c $(BUILD)/user/irqframes.o | $(BUILD)/tests
	$(CC) $(CFLAGS) -Iuser $^ -o $@

$(BUILD)/tests/test_zc_seq: tests/unit/test_zc_seq.c bpf/zc_seq.h | $(BUILD)/tests
	$(CC) $(CFLAGS) -Ibpf -Itests/unit $< -o $@

$(BUILD)/tests/%: tests/unit/%.c $(WL_LIB_OBJS) $(COMMON_OBJS) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Iworkloads -Iuser -Icommon $^ -o $@ -lpthread -luring

# nothing of workloads/, of common/ only the kernel's interface (tests/programs/progs.h says why)
$(BUILD)/tests/programs/uring-send-zc: PROG_LIBS := -luring
$(BUILD)/tests/programs/%: tests/programs/%.c $(wildcard tests/programs/*.h) common/msg_zerocopy.h common/uring_zc.h | $(BUILD)/tests/programs
	$(CC) $(CFLAGS) -Icommon $< -o $@ $(PROG_LIBS)

unittest: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do $$t; done

# --durations: CI's log names its ten slowest tests, where its time goes
pytest: all
	NETIO_FULL_TEST=1 NETIO_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -rs --durations=10 tests/python tests/integration

vmtest: all
	NETIO_BUILD=$(abspath $(BUILD)) ./tests/vm/run-vmtest.sh

# the agent's soak (tests/soak/: 10 minutes of churn, NETIO_SOAK_S to change it); `test` runs
# it beside vmtest, whose QEMU guests take one core
soak: all
	NETIO_FULL_TEST=1 NETIO_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -rs -s tests/soak

# deps first, in a make of its own: CLANG and BPFTOOL are looked up when a make starts, and
# on a fresh machine they exist only after deps
test:
	@$(AS_ROOT) $(MAKE) --no-print-directory deps
	@$(AS_ROOT) $(MAKE) --no-print-directory all
	@$(AS_ROOT) $(MAKE) --no-print-directory unittest
	@$(AS_ROOT) $(MAKE) --no-print-directory pytest
	@$(AS_ROOT) $(MAKE) --no-print-directory -j2 vmtest soak

run:
	@$(AS_ROOT) $(MAKE) --no-print-directory deps
	@$(AS_ROOT) $(MAKE) --no-print-directory all
	$(AS_ROOT) ./netio-trace run

bench:
	@$(AS_ROOT) $(MAKE) --no-print-directory deps
	@$(AS_ROOT) $(MAKE) --no-print-directory all
	$(AS_ROOT) env NETIO_BUILD=$(abspath $(BUILD)) $(PYTHON) -m bench.run

$(BUILD)/common $(BUILD)/workloads $(BUILD)/bpf $(BUILD)/include $(BUILD)/user $(BUILD)/tests \
$(BUILD)/tests/programs:
	@mkdir -p $@

clean:
	rm -rf $(BUILD) build-*
