# bench/lib/ticks.sh - sourced by the scripts that time a worker by its own
# CPU (run.sh, pairs.sh).
#
# proc_ticks PID: utime + stime of the process, in clock ticks (fields 14
# and 15 of /proc/PID/stat; the command name in field 2 may hold spaces).
# Prints nothing when the process is gone.
proc_ticks() {
    local stat
    [ -r "/proc/$1/stat" ] || return 0
    stat=$(<"/proc/$1/stat") || return 0
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat
    echo $(( ${12} + ${13} ))
}

# clock ticks a second
CLK_TCK=$(getconf CLK_TCK)
