# config.make - nginx's auto/make sources this after writing its Makefile.
#
# Adds the rules of the C++17 core (src/core/core.mk) to nginx's Makefile
# and makes the module's link depend on the archive, so one `make modules`
# (parallel or not) compiles the core, archives it and links the module, and
# a change to a core source or header relinks the module.
#
# The core's flags are taken here, at configure time, as nginx takes CFLAGS:
# CXX (default g++), CPPFLAGS and CXXFLAGS (default -O2 -g) from the
# environment, and FLAGS_CORE_CXXFLAGS (sanitizers, -DFL_NO_PCRE2_JIT) last.
# `make FLAGS_CORE_OPT=...` overrides them for one run.

cat << END                                                    >> $NGX_MAKEFILE

# ngx_http_flags_module: the C++17 core, see $ngx_addon_dir/src/core/core.mk

FLAGS_CORE_DIR = $ngx_addon_dir/src/core
FLAGS_CORE_OBJDIR = $FLAGS_CORE_OBJDIR
FLAGS_CORE_CXX = ${CXX:-g++}
FLAGS_CORE_OPT = ${CPPFLAGS:+$CPPFLAGS }${CXXFLAGS:--O2 -g}
FLAGS_CORE_CXXFLAGS = ${FLAGS_CORE_CXXFLAGS:-}

include \$(FLAGS_CORE_DIR)/core.mk

$NGX_OBJS${ngx_dirsep}ngx_http_flags_module$ngx_modext:	\$(FLAGS_CORE_LIB)

END
