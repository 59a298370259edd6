# shellcheck shell=bash
#
# contrib/lab/lib.sh: what contrib/lab/up and contrib/lab/down share, each
# defined once so that the two cannot drift apart: down must recognise exactly
# the daemons that up recorded, by the same tests. Sourced by both through the
# path of the script itself (readlink -f, so a symlink to up or down works), never
# run. Sourcing it only defines constants and functions, and T0, the moment that
# the progress lines count from.

readonly STATE_DIR=/run/slurm-dsl-lab
# $STARTED/NAME: "<pid> <token> <pid file>" of the NAME daemon that up started.
readonly STARTED=$STATE_DIR/started
# The plain user the integration tests act as (a job's non-owner).
# shellcheck disable=SC2034 # used by up and down, which source this file
readonly TEST_USER=slurmdsl-alice
# How long a daemon has after SIGTERM (slurmctld saves its state first, 1-3 s
# with many jobs).
# shellcheck disable=SC2034 # used by up and down, which source this file
readonly GRACE_MS=30000

# lab_args ARG...: the command line of up and down, which take only --help.
# Calls the script's own usage function.
lab_args() {
    case "${1-}" in
        -h | --help) usage; exit 0 ;;
        "") ;;
        *) printf 'slurm-dsl lab: unknown argument: %s\n' "$1" >&2; usage >&2; exit 2 ;;
    esac
}

# Milliseconds since the epoch without forking (bash 5; the separator depends
# on the locale, hence the strip of every non-digit).
now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((t / 1000)); }
T0=$(now_ms)
readonly T0
log() { printf 'slurm-dsl lab: +%d ms %s\n' $(($(now_ms) - T0)) "$*" >&2; }
die() { printf 'slurm-dsl lab: error: %s\n' "$*" >&2; exit 1; }

# lab_lock SECONDS: take the lab's lock on fd 9, so that runs of up and down
# (CI, the demo, tests restarting slurmctld) never overlap. up closes fd 9 for
# every daemon it starts, or the daemon would hold the lock forever.
lab_lock() {
    exec 9>"$STATE_DIR/lock"
    flock -w "$1" 9 || die "another contrib/lab/up or down holds $STATE_DIR/lock"
}

# --- process helpers ------------------------------------------------------

# alive PID NAME: PID exists, is not a zombie, and its comm is NAME, or
# NAME-wlm: Debian 13 installs the daemons as NAME-wlm behind an alternatives
# symlink, and a daemon that re-execs itself (24.x reconfigure) shows that.
# A zombie counts as gone: where PID 1 does not reap (containers), a stopped
# daemon lingers as one, and kill -0 alone would call it running.
alive() {
    local stat comm
    [[ $1 =~ ^[1-9][0-9]*$ ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ ${stat##*) } != Z* ]] || return 1
    kill -0 "$1" 2>/dev/null || return 1
    comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
    [[ $comm == "$2" || $comm == "$2-wlm" ]]
}

# running_pid NAME PIDFILE: print the pid from PIDFILE if that process is NAME.
running_pid() {
    local pid=""
    if [[ -r $2 ]]; then read -r pid 2>/dev/null <"$2" || true; fi
    alive "$pid" "$1" && echo "$pid"
}

# wait_gone NAME PID MS: wait until PID is no longer a live NAME; fail if it
# still is after MS milliseconds.
wait_gone() {
    local deadline=$(($(now_ms) + $3))
    while alive "$2" "$1"; do
        (($(now_ms) < deadline)) || return 1
        sleep 0.05
    done
}

# Which daemons are ours. Each daemon up starts gets SLURM_DSL_LAB_TOKEN=<random>
# in its environment, and $STARTED/NAME holds "<pid> <token> <pid file>".
# Since 24.05, `scontrol reconfigure` (or SIGHUP) makes slurmctld and slurmd
# re-exec themselves under a new pid; the environment is inherited, so the
# token tells our daemon's successor from a daemon someone else started.
has_token() { grep -qzx "SLURM_DSL_LAB_TOKEN=$2" "/proc/$1/environ" 2>/dev/null; }
forget() { rm -f "$STARTED/$1"; }
# ours_pid NAME: print the pid of our running NAME; fail if it is not running
# or not ours. If the recorded pid is gone, the process now named by the
# recorded pid file is ours only if it carries our token (a re-exec); the
# record is then updated to that pid.
ours_pid() {
    local pid="" token="" pidfile="" cand=""
    read -r pid token pidfile 2>/dev/null <"$STARTED/$1" || true
    [[ -n $token ]] || return 1
    if alive "$pid" "$1" && has_token "$pid" "$token"; then
        echo "$pid"
        return
    fi
    cand=$(running_pid "$1" "$pidfile") && has_token "$cand" "$token" || return 1
    echo "$cand $token $pidfile" >"$STARTED/$1"
    echo "$cand"
}
