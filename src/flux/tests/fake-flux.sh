#!/bin/bash
# A stand-in for `flux` in the behaviour tests. It is NOT Flux: it records how it was called
# and does the least a real flux would do, so the tests can check the entrypoints' decisions
# (which flux commands, with which exact arguments, in which order).
#
# Every call appends one record to $FAKE_FLUX_LOG: the argument count, then each argument,
# all NUL-terminated (arguments may contain anything but NUL).
#
# Behaviour:
#   flux start [--wrap=W] -o --config DIR [-S...] [PROGRAM...]
#       records the call, then the variables named in $FAKE_FLUX_SHOW_ENV as
#       ("env", NAME, VALUE) records; runs PROGRAM if given and exits with its status,
#       otherwise (a broker without a program) exits with the next status from the
#       file $FAKE_FLUX_START_RCS (one per line; 0 when the file is missing or used up).
#       With $FAKE_FLUX_START_CRASH set, it exits with that status at once, running no
#       program (a broker that crashed).
#   flux batch ... SCRIPT   runs SCRIPT with bash (like the batch job would; its stdout to
#                           stderr), then prints the id `fake-batch` and exits 0: a real
#                           flux batch returns once submitted, `flux job status` tells the end.
#   flux submit ...         prints the id `fake-job` (unless --quiet), then exits with
#                           $FAKE_FLUX_RC_submit (default 0).
#   flux uptime             prints the file $FAKE_FLUX_UPTIME (a broker's summary line) when
#                           it exists, then exits with $FAKE_FLUX_RC_uptime (default 0).
#   flux R decode ...       prints $FAKE_FLUX_CORES (default 2: the cores a real flux would
#                           count), then exits with $FAKE_FLUX_RC_R (default 0).
#   flux config builtin NAME
#                           prints /opt/flux/etc/flux/shell/initrc.lua (the only one asked).
#   flux <anything else>    exits with $FAKE_FLUX_RC_<subcommand> (default 0).

# One printf, so one append: the two ends of a pipe (`flux R encode | flux R decode`) record
# at once.
record() {
    printf '%s\0' "$#" "$@" >>"$FAKE_FLUX_LOG"
}

record "$@"

case "${1-}" in
start)
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
        --wrap=*) shift ;;
        -o)
            # `-o --config DIR`: flux start takes `--config` as -o's value, DIR goes to the broker.
            shift 3
            ;;
        -S*) shift ;;
        *) break ;;
        esac
    done
    for name in ${FAKE_FLUX_SHOW_ENV-}; do
        if [ -n "${!name+set}" ]; then
            record env "$name" "${!name}"
        else
            record env "$name" "<unset>"
        fi
    done
    if [ -n "${FAKE_FLUX_START_CRASH-}" ]; then
        exit "$FAKE_FLUX_START_CRASH"
    fi
    if [ $# -gt 0 ]; then
        "$@"
        exit $?
    fi
    rc=0
    if [ -n "${FAKE_FLUX_START_RCS-}" ] && [ -s "$FAKE_FLUX_START_RCS" ]; then
        rc=$(head -n 1 "$FAKE_FLUX_START_RCS")
        tail -n +2 "$FAKE_FLUX_START_RCS" >"$FAKE_FLUX_START_RCS.next"
        mv "$FAKE_FLUX_START_RCS.next" "$FAKE_FLUX_START_RCS"
    fi
    exit "$rc"
    ;;
batch)
    bash "${!#}" >&2
    echo fake-batch
    ;;
submit)
    case " $* " in
    *" --quiet "*) ;;
    *) echo fake-job ;;
    esac
    exit "${FAKE_FLUX_RC_submit:-0}"
    ;;
R)
    if [ "${2-}" = decode ]; then echo "${FAKE_FLUX_CORES:-2}"; fi
    exit "${FAKE_FLUX_RC_R:-0}"
    ;;
config)
    echo /opt/flux/etc/flux/shell/initrc.lua
    ;;
uptime)
    if [ -n "${FAKE_FLUX_UPTIME-}" ] && [ -f "$FAKE_FLUX_UPTIME" ]; then
        cat "$FAKE_FLUX_UPTIME"
    fi
    exit "${FAKE_FLUX_RC_uptime:-0}"
    ;;
*)
    var="FAKE_FLUX_RC_${1//-/_}"
    exit "${!var:-0}"
    ;;
esac
