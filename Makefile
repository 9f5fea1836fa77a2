# Makefile - what builds outside nginx's make: the core library for the
# cmocka unit tests and the libFuzzer targets.  GNU make; build.sh drives it.
# The module itself is built by nginx's make (config, config.make), from the
# same description of the core (src/core/core.mk).
#
#   make core              $(BUILD)/core/libflagscore.a
#   make unit              the unit test binaries, $(BUILD)/unit/test_*
#   make fuzz              the fuzz targets, $(BUILD)/fuzz/bin/fuzz_*
#
# Variables: BUILD (default build), CXX, CPPFLAGS, CXXFLAGS (default -O2 -g),
# FLAGS_CORE_CXXFLAGS (appended to the core's flags: sanitizers,
# -DFL_NO_PCRE2_JIT), UNIT_CFLAGS_EXTRA (appended to the unit tests' flags),
# FUZZ_CXX (default clang++), FUZZ_CXXFLAGS_EXTRA.  Changed flags rebuild
# what they apply to; headers are tracked (-MMD -MP).

ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
BUILD ?= $(ROOT)/build

.PHONY: all core unit fuzz
all: core unit

# ---------------------------------------------------------------- the core

CXXFLAGS ?= -O2 -g
FLAGS_CORE_DIR = $(ROOT)/src/core
FLAGS_CORE_OBJDIR = $(BUILD)/core
FLAGS_CORE_CXX = $(CXX)
FLAGS_CORE_OPT = $(CPPFLAGS) $(CXXFLAGS)
include $(ROOT)/src/core/core.mk

core: $(FLAGS_CORE_LIB)

# ------------------------------------------------------ cmocka unit tests

UNIT_SRCS = $(wildcard $(ROOT)/t/unit/test_*.c)
UNIT_BINS = $(UNIT_SRCS:$(ROOT)/t/unit/%.c=$(BUILD)/unit/%)
UNIT_CFLAGS = -std=c11 -O1 -g -Wall -Wextra -Werror -I$(FLAGS_CORE_DIR) $(UNIT_CFLAGS_EXTRA)
UNIT_STAMP = $(BUILD)/unit/.cflags

unit: $(UNIT_BINS)

$(UNIT_STAMP): flags_core_force
	@mkdir -p $(@D)
	@f='$(CC) $(UNIT_CFLAGS)'; if [ "$$f" != "`cat $@ 2>/dev/null`" ]; then echo "$$f" >$@; fi

$(UNIT_BINS): $(BUILD)/unit/%: $(ROOT)/t/unit/%.c $(FLAGS_CORE_LIB) $(UNIT_STAMP)
	$(CC) $(UNIT_CFLAGS) -MMD -MP -MF $@.d -MT $@ -o $@ $< $(FLAGS_CORE_LIB) \
		$(FLAGS_CORE_LDLIBS) -lcmocka

-include $(UNIT_BINS:%=%.d)

# -------------------------------------------------- libFuzzer targets

# The core again, built by clang with the fuzzer's instrumentation: the same
# sources and language flags, without -Werror (clang warns differently).
FUZZ_CXX ?= clang++
FUZZ_OUT = $(BUILD)/fuzz
FUZZ_CXXFLAGS = $(FLAGS_CORE_STD) -g -O1 -fno-omit-frame-pointer $(FLAGS_CORE_WARN) \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined $(FUZZ_CXXFLAGS_EXTRA)
FUZZ_OBJS = $(FLAGS_CORE_SRCS:%.cpp=$(FUZZ_OUT)/obj/core_%.o)
FUZZ_BINS = $(patsubst $(ROOT)/fuzz/fuzz_%.cc,$(FUZZ_OUT)/bin/fuzz_%,$(wildcard $(ROOT)/fuzz/fuzz_*.cc))
FUZZ_STAMP = $(FUZZ_OUT)/.cxxflags

fuzz: $(FUZZ_BINS)

$(FUZZ_STAMP): flags_core_force
	@mkdir -p $(FUZZ_OUT)/obj $(FUZZ_OUT)/bin
	@f='$(FUZZ_CXX) $(FUZZ_CXXFLAGS)'; if [ "$$f" != "`cat $@ 2>/dev/null`" ]; then echo "$$f" >$@; fi

$(FUZZ_OBJS): $(FUZZ_OUT)/obj/core_%.o: $(FLAGS_CORE_DIR)/%.cpp $(FUZZ_STAMP)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

# the operator's page, as core.mk embeds it
$(FUZZ_OUT)/obj/core_dashboard.o: $(FLAGS_DASHBOARD_INC)
$(FUZZ_OUT)/obj/core_dashboard.o: FUZZ_CXXFLAGS += -I$(FLAGS_CORE_OBJDIR)

$(FUZZ_OUT)/bin/fuzz_%: $(ROOT)/fuzz/fuzz_%.cc $(FUZZ_OBJS) $(FUZZ_STAMP)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer -MMD -MP -MF $@.d -MT $@ -o $@ $< \
		$(FUZZ_OBJS) $(FLAGS_CORE_LDLIBS)

-include $(FUZZ_OBJS:.o=.d) $(FUZZ_BINS:%=%.d)
