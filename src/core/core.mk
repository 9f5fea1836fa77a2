# src/core/core.mk - the C++17 core of ngx_http_flags_module, described once.
#
# Included (GNU make) by config.make into nginx's own Makefile, so that
# `configure --add-dynamic-module=... && make modules` builds the core with
# no pre-step, and by the top-level Makefile, which build.sh uses for the
# unit tests and the fuzz targets.  The includer sets
#
#   FLAGS_CORE_DIR       this directory
#   FLAGS_CORE_OBJDIR    where the objects, their .d files and libflagscore.a go
#
# and may set
#
#   FLAGS_CORE_CXX       the C++ compiler (default g++)
#   FLAGS_CORE_OPT       the user's CPPFLAGS and CXXFLAGS (default -O2 -g)
#   FLAGS_CORE_CXXFLAGS  appended last: sanitizers, -DFL_NO_PCRE2_JIT
#
# Changing any of them rebuilds the core (the flags are kept in a stamp file).

# The sources, one a line: add or rename a file here and nowhere else.
FLAGS_CORE_SRCS = \
	dashboard.cpp \
	definitions.cpp \
	etag.cpp \
	evaluate.cpp \
	json_reader.cpp \
	json_scan.cpp \
	json_writer.cpp \
	lanes.cpp \
	messages.cpp \
	metrics.cpp \
	murmur3.cpp \
	number.cpp \
	ofrep.cpp \
	override.cpp \
	policy.cpp \
	project.cpp \
	regression.cpp \
	ramp.cpp \
	query.cpp \
	report.cpp \
	sdk.cpp \
	semver.cpp \
	sentinel.cpp \
	state.cpp \
	statefile.cpp \
	status_json.cpp \
	sync_health.cpp \
	sync_reply.cpp \
	sync_round.cpp \
	sync_script.cpp \
	tally.cpp \
	utf8.cpp \
	variables.cpp \
	witness.cpp

# What a program linking libflagscore.a needs after it.
FLAGS_CORE_LDLIBS = -lyajl -lpcre2-8 -lstdc++ -lm

# The core's own flags, whatever nginx compiles its C with: C++17, position
# independent (it ends up in a .so), only the C API (flags_core.h) visible.
FLAGS_CORE_STD = -std=c++17
FLAGS_CORE_WARN = -Wall -Wextra -Wno-unused-parameter
FLAGS_CORE_BASE = $(FLAGS_CORE_STD) -fPIC -fvisibility=hidden -fno-strict-aliasing \
	$(FLAGS_CORE_WARN) -Werror

FLAGS_CORE_CXX ?= g++
FLAGS_CORE_AR ?= ar
FLAGS_CORE_OPT ?= -O2 -g
FLAGS_CORE_CXXFLAGS ?=
FLAGS_CORE_ALL = $(FLAGS_CORE_BASE) $(FLAGS_CORE_OPT) $(FLAGS_CORE_CXXFLAGS)

FLAGS_CORE_OBJS = $(FLAGS_CORE_SRCS:%.cpp=$(FLAGS_CORE_OBJDIR)/%.o)
FLAGS_CORE_LIB = $(FLAGS_CORE_OBJDIR)/libflagscore.a
FLAGS_CORE_STAMP = $(FLAGS_CORE_OBJDIR)/.cxxflags

# Rewritten only when the flags differ, so its date says "flags changed".
$(FLAGS_CORE_STAMP): flags_core_force
	@mkdir -p $(FLAGS_CORE_OBJDIR)
	@f='$(FLAGS_CORE_CXX) $(FLAGS_CORE_ALL)'; \
	if [ "$$f" != "`cat $@ 2>/dev/null`" ]; then echo "$$f" >$@; fi

.PHONY: flags_core_force
flags_core_force:

$(FLAGS_CORE_OBJS): $(FLAGS_CORE_OBJDIR)/%.o: $(FLAGS_CORE_DIR)/%.cpp $(FLAGS_CORE_STAMP)
	$(FLAGS_CORE_CXX) $(FLAGS_CORE_ALL) -MMD -MP -c -o $@ $<

# Archived afresh: a source dropped from the list leaves no object behind.
$(FLAGS_CORE_LIB): $(FLAGS_CORE_OBJS)
	rm -f $@
	$(FLAGS_CORE_AR) rcs $@ $(FLAGS_CORE_OBJS)

# The operator's page (docs/dashboard.md) is built into the core:
# src/dashboard/embed.sh turns its files into byte arrays that dashboard.cpp
# includes, rewritten whenever a file changes.
FLAGS_DASHBOARD_DIR = $(FLAGS_CORE_DIR)/../dashboard
FLAGS_DASHBOARD_FILES = $(FLAGS_DASHBOARD_DIR)/index.html \
	$(FLAGS_DASHBOARD_DIR)/app.js $(FLAGS_DASHBOARD_DIR)/app.css
FLAGS_DASHBOARD_INC = $(FLAGS_CORE_OBJDIR)/dashboard_assets.inc

$(FLAGS_DASHBOARD_INC): $(FLAGS_DASHBOARD_FILES) $(FLAGS_DASHBOARD_DIR)/embed.sh
	@mkdir -p $(FLAGS_CORE_OBJDIR)
	sh $(FLAGS_DASHBOARD_DIR)/embed.sh $@ $(FLAGS_DASHBOARD_FILES)

$(FLAGS_CORE_OBJDIR)/dashboard.o: $(FLAGS_DASHBOARD_INC)
$(FLAGS_CORE_OBJDIR)/dashboard.o: FLAGS_CORE_ALL += -I$(FLAGS_CORE_OBJDIR)

-include $(FLAGS_CORE_OBJS:.o=.d)
