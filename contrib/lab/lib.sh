# shellcheck shell=bash
#
# contrib/lab/lib.sh: what contrib/lab/up and contrib/lab/down share, each
# defined once so that the two cannot drift apart: down must recognise exactly
# the daemons that up recorded, by the same tests. Sourced by both through the
# path of the script itself (readlink -f, so a symlink to up or down works), never
# run. Sourcing it only defines constants and functions, and T0, the moment that
# the progress lines count from. contrib/lab/mariadb and contrib/lab/pair source
# it too.

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

# --- MariaDB: the server of the ledger's MariaDB tests --------------------
# Started by up and contrib/lab/mariadb the way systemd would start Debian's,
# but without systemd: mariadbd as user mysql on Debian's datadir and socket,
# listening on 127.0.0.1:3306 only. Recorded in $STARTED/mariadbd like the
# Slurm daemons, so that down and `mariadb stop` stop only a server the lab
# started. Client calls take the password from an option file, or are root's
# over the socket (unix_socket, Debian's default): no password is ever in argv.

# shellcheck disable=SC2034 # some are used only by up, down and mariadb
{
    readonly MARIADB_SOCK=/run/mysqld/mysqld.sock
    readonly MARIADB_PIDFILE=/run/mysqld/mysqld.pid
    readonly MARIADB_DATADIR=/var/lib/mysql
    readonly MARIADB_LOG=/var/log/mysql/mariadbd.log
    readonly MARIADB_PORT=3306
    readonly MARIADB_PACKAGES=(mariadb-server mariadb-client)
    # The lab's ledger account and its option file, whose first line marks it as
    # ours (kept up to date by up; one without that line is used as it is).
    readonly LEDGER_CNF=/etc/slurm-dsl/ledger.cnf
    readonly LEDGER_CNF_MARKER='# slurm-dsl lab'
    readonly LEDGER_DB=slurm_dsl LEDGER_USER=slurm_dsl
    # Seconds to wait for mariadbd to answer once started, InnoDB's recovery
    # after a killed server included.
    readonly MARIADB_TIMEOUT=${SLURM_DSL_LAB_MARIADB_TIMEOUT:-60}
}
# Why the last mariadb_* function failed, for the caller's message:
# mariadb_fail MSG sets it and fails.
mariadb_error=""
# shellcheck disable=SC2034 # read by up and mariadb
mariadb_fail() { mariadb_error=$1; return 1; }

# mariadb_answers: the server answers on the socket. `mariadb-admin ping`
# succeeds even when access is denied: it tests the server, not an account.
mariadb_answers() {
    mariadb-admin --protocol=socket --socket="$MARIADB_SOCK" --user=root --connect-timeout=2 ping >/dev/null 2>&1
}

# mariadb_root: the mariadb client as root over the socket (unix_socket
# authentication); the SQL comes on stdin.
mariadb_root() {
    mariadb --protocol=socket --socket="$MARIADB_SOCK" --user=root --batch --skip-column-names
}

# mariadb_start: start mariadbd unless the socket answers already, and wait
# (bounded) until it does. A server that answers but that the lab did not
# start is used as it is. Fails (1, the reason in $mariadb_error) if it cannot
# be started.
mariadb_start() {
    local pid token deadline
    if mariadb_answers; then
        if pid=$(ours_pid mariadbd); then
            log "mariadbd running (pid $pid)"
        else
            forget mariadbd
            log "MariaDB answers on $MARIADB_SOCK (not started by the lab: left alone)"
        fi
        return 0
    fi
    if [[ ! -x /usr/sbin/mariadbd ]] || ! command -v mariadb-admin >/dev/null || ! command -v mariadb >/dev/null; then
        mariadb_fail "mariadbd, mariadb or mariadb-admin is missing (Debian's ${MARIADB_PACKAGES[*]}: contrib/lab/up installs them)" || return
    fi
    getent passwd mysql >/dev/null || { mariadb_fail "there is no user mysql (mariadb-server's postinst makes it)"; return; }
    # A mariadbd that runs but does not answer yet (recovering, or starting):
    # wait for it, never start a second one on the same datadir.
    if pid=$(running_pid mariadbd "$MARIADB_PIDFILE"); then
        log "mariadbd (pid $pid) runs but does not answer yet: waiting for it"
    else
        # systemd's RuntimeDirectory= would make /run/mysqld; /run is a tmpfs.
        install -d -o mysql -g root -m 0755 /run/mysqld
        install -d -o mysql -g adm -m 2750 "${MARIADB_LOG%/*}"
        if [[ ! -d $MARIADB_DATADIR/mysql ]]; then
            install -d -o mysql -g mysql -m 0755 "$MARIADB_DATADIR"
            # root@localhost authenticates by unix_socket: only root, over the socket.
            if ! mariadb-install-db --user=mysql --datadir="$MARIADB_DATADIR" --skip-test-db \
                --auth-root-authentication-method=socket >"$STATE_DIR/mariadb-install-db.log" 2>&1; then
                tail -n 5 "$STATE_DIR/mariadb-install-db.log" | sed 's/^/    /' >&2
                mariadb_fail "mariadb-install-db failed (log: $STATE_DIR/mariadb-install-db.log)" || return
            fi
            log "initialised $MARIADB_DATADIR"
        fi
        token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
        # The options given here override Debian's /etc/mysql files. mariadbd
        # does not daemonize: setsid takes it out of our session, fds 8 and 9
        # (the chroot's and the lab's locks) are closed, and it is recorded at
        # once with the token in its environment (see ours_pid).
        SLURM_DSL_LAB_TOKEN=$token setsid /usr/sbin/mariadbd --user=mysql --datadir="$MARIADB_DATADIR" \
            --socket="$MARIADB_SOCK" --pid-file="$MARIADB_PIDFILE" --port="$MARIADB_PORT" \
            --bind-address=127.0.0.1 --skip-networking=0 --log-error="$MARIADB_LOG" \
            </dev/null >"$STATE_DIR/mariadbd.start.log" 2>&1 8>&- 9>&- &
        pid=$!
        echo "$pid $token $MARIADB_PIDFILE" >"$STARTED/mariadbd"
        log "mariadbd starting (pid $pid, log $MARIADB_LOG)"
    fi
    deadline=$(($(now_ms) + MARIADB_TIMEOUT * 1000))
    until mariadb_answers; do
        # Not alive(): until setsid has exec'd mariadbd, the child's comm differs.
        if [[ ! -e /proc/$pid ]] || [[ $(cat "/proc/$pid/stat" 2>/dev/null) =~ \)\ Z ]]; then
            forget mariadbd
            tail -n 5 "$MARIADB_LOG" "$STATE_DIR/mariadbd.start.log" 2>/dev/null | sed 's/^/    /' >&2
            mariadb_fail "mariadbd (pid $pid) exited without answering; its log: $MARIADB_LOG" || return
        fi
        if (($(now_ms) >= deadline)); then
            mariadb_fail "mariadbd (pid $pid) does not answer on $MARIADB_SOCK after ${MARIADB_TIMEOUT}s; its log: $MARIADB_LOG" || return
        fi
        sleep 0.05
    done
    log "MariaDB answers on $MARIADB_SOCK and 127.0.0.1:$MARIADB_PORT"
}

# mariadb_stop: stop the mariadbd that the lab started (SIGTERM: a clean
# shutdown), and wait (bounded) until it is gone and the socket no longer
# answers. One that the lab did not start is never stopped: that fails.
mariadb_stop() {
    local pid deadline
    if ! pid=$(ours_pid mariadbd); then
        forget mariadbd
        if mariadb_answers; then
            mariadb_fail "the MariaDB answering on $MARIADB_SOCK was not started by the lab: not stopping it" || return
        fi
        log "mariadbd is not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone mariadbd "$pid" "$GRACE_MS"; then
        log "warning: mariadbd (pid $pid) ignored SIGTERM for $((GRACE_MS / 1000)) s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone mariadbd "$pid" 5000 || { mariadb_fail "mariadbd (pid $pid) is still running"; return; }
    fi
    forget mariadbd
    deadline=$(($(now_ms) + 5000))
    while mariadb_answers; do
        if (($(now_ms) >= deadline)); then
            mariadb_fail "mariadbd (pid $pid) is gone, but something still answers on $MARIADB_SOCK" || return
        fi
        sleep 0.05
    done
    log "stopped mariadbd (pid $pid)"
}

# ledger_cnf_works [CLIENT-OPTION...]: the account of $LEDGER_CNF can use
# database $LEDGER_DB (over its socket, or as the options say).
ledger_cnf_works() {
    mariadb --defaults-file="$LEDGER_CNF" "$@" --batch --skip-column-names -e 'SELECT 1' "$LEDGER_DB" </dev/null >/dev/null 2>&1
}

# mariadb_account: create (idempotently) database $LEDGER_DB and the account
# $LEDGER_USER at localhost and 127.0.0.1, with ALL on $LEDGER_DB and on the
# per-test databases slurm_dsl_t_* and nothing else, and write its password to
# $LEDGER_CNF (0600, root). The password is made once: the one in our file is
# kept. A file that is not ours (no marker line) is used as it is if it works,
# and is never rewritten.
mariadb_account() {
    local first="" line password="" sql="" new tmp
    if [[ -e $LEDGER_CNF ]]; then
        IFS= read -r first <"$LEDGER_CNF" || true
        if [[ $first != "$LEDGER_CNF_MARKER"* ]]; then
            if ledger_cnf_works; then
                log "$LEDGER_CNF is not ours (no '$LEDGER_CNF_MARKER' first line) and works: using it as it is"
                return 0
            fi
            mariadb_fail "$LEDGER_CNF is not ours (no '$LEDGER_CNF_MARKER' first line) and cannot use database $LEDGER_DB: fix or remove it" || return
        fi
        while IFS= read -r line; do
            [[ $line =~ ^password=([0-9a-f]{32,})$ ]] && password=${BASH_REMATCH[1]}
        done <"$LEDGER_CNF"
    fi
    [[ -n $password ]] || password=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
    # In grants, _ and % are wildcards: `slurm\_dsl` is that one database.
    # IF NOT EXISTS and GRANT are idempotent, and ALTER USER makes both
    # accounts' password the file's (kept across a new datadir). The password
    # is only in this SQL, which goes to the client on stdin.
    read -r -d '' sql <<'SQL' || true
CREATE DATABASE IF NOT EXISTS `slurm_dsl` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE USER IF NOT EXISTS 'slurm_dsl'@'localhost' IDENTIFIED BY '@PASSWORD@';
CREATE USER IF NOT EXISTS 'slurm_dsl'@'127.0.0.1' IDENTIFIED BY '@PASSWORD@';
ALTER USER 'slurm_dsl'@'localhost' IDENTIFIED BY '@PASSWORD@';
ALTER USER 'slurm_dsl'@'127.0.0.1' IDENTIFIED BY '@PASSWORD@';
GRANT ALL PRIVILEGES ON `slurm\_dsl`.* TO 'slurm_dsl'@'localhost', 'slurm_dsl'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `slurm\_dsl\_t\_%`.* TO 'slurm_dsl'@'localhost', 'slurm_dsl'@'127.0.0.1';
SQL
    # The client's errors may quote the SQL: its log is root's alone, and the
    # password is masked in the message.
    if ! (umask 077 && printf '%s\n' "${sql//@PASSWORD@/$password}" | mariadb_root >"$STATE_DIR/mariadb-account.log" 2>&1); then
        line=$(tail -n 1 "$STATE_DIR/mariadb-account.log")
        mariadb_fail "creating database $LEDGER_DB and account $LEDGER_USER as root over $MARIADB_SOCK failed: ${line//$password/<password>}" || return
    fi
    new="$LEDGER_CNF_MARKER: written by contrib/lab/up, which keeps its password. Delete this line to keep local edits.
# The lab's MariaDB account for slurm-dsl's ledger tests (contrib/lab/README.md).
[client]
user=$LEDGER_USER
password=$password
host=localhost
socket=$MARIADB_SOCK"
    if [[ ! -e $LEDGER_CNF || $(<"$LEDGER_CNF") != "$new" ]]; then
        # 0600 before the password goes in; renamed into place.
        tmp=$LEDGER_CNF.tmp.$$
        if ! { install -d -m 0755 "${LEDGER_CNF%/*}" && install -m 0600 -o root -g root /dev/null "$tmp" \
            && printf '%s\n' "$new" >"$tmp" && mv -f "$tmp" "$LEDGER_CNF"; }; then
            rm -f "$tmp"
            mariadb_fail "could not write $LEDGER_CNF" || return
        fi
        log "wrote $LEDGER_CNF"
    fi
    if ! ledger_cnf_works; then
        mariadb_fail "the account in $LEDGER_CNF cannot use database $LEDGER_DB over $MARIADB_SOCK" || return
    fi
    if ! ledger_cnf_works --protocol=tcp --host=127.0.0.1 --port="$MARIADB_PORT"; then
        mariadb_fail "the account in $LEDGER_CNF cannot use database $LEDGER_DB over 127.0.0.1:$MARIADB_PORT" || return
    fi
    log "database $LEDGER_DB and account $LEDGER_USER ok ($LEDGER_CNF)"
}
