# slurm-dsl requeuehold call 3 on 3 jobs: rendered by slurm_dsl.core.script; runs under dash and bash
# Set by the runner's TERM at the deadline: from then on no call starts (75).
stopped=0; trap 'stopped=1' TERM
PATH=/usr/sbin:/usr/bin:/sbin:/bin; export PATH
# Die with the runner: given the lifeline's fd and the backstop's seconds (as the runner
# gives them), the guards KILL this script's group if the runner dies or stops keeping time.
if [ "$#" -ge 2 ]; then
  { ( trap '' TERM; (read -r _ </dev/fd/"$1"; kill -KILL 0) & (sleep "$2"; kill -KILL 0) & ) & } </dev/null >/dev/null 2>&1
fi
# The runner keeps the deadline, 1767225600500 ms since the epoch: TERM to this script's
# process group then, KILL 1 s later.  No clock is read here.
# This script's nonce, the scontrol it runs, and the status of the last call.
nonce='9f3c2a7b1e4d5f60718293a4b5c6d7e8' scontrol='/usr/bin/scontrol' status=0
# call NUMBER ARGS...: run scontrol ARGS unless the deadline has passed, then print its status line.
call() {
  number=$1; shift
  if [ "$stopped" -eq 1 ]; then
    # The deadline has passed: the call is not started.
    status=75
  elif [ ! -e "$scontrol" ]; then
    # No such file (or a symlink to nothing): the call is not started.
    status=127
  elif [ ! -f "$scontrol" ] || [ ! -x "$scontrol" ]; then
    # A directory, a device or a file we may not execute: exec would fail, so it is not started.
    status=126
  else
    # Start it in the background, so that the runner's TERM at the deadline ends the wait at once.
    "$scontrol" "$@" </dev/null &
    pid=$!
    if [ "$stopped" -eq 1 ]; then
      # The TERM came as it was started, so it never got one, and a TERM before its exec is lost: KILL.
      kill -KILL "$pid" 2>/dev/null; status=143
    else
      # Wait for it; a wait the TERM cuts short returns 143.  (The waits' stderr is the shell's own.)
      wait "$pid" 2>/dev/null; status=$?
      # 75, 126 and 127 say "not started", which only this script may say: a started call (a site
      # wrapper, or a file gone between the check and its exec) that exits so failed: 125.
      case $status in 75|126|127) status=125 ;; esac
    fi
    # Still running when the TERM came: TERM it (its group got one too), reap it, and report 124.
    if [ "$stopped" -eq 1 ] && [ "$status" -eq 143 ]; then
      kill -TERM "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      status=124
    fi
  fi
  # The status line on stderr: RS, "DSL", the nonce, the call number, its status.
  printf '\036DSL %s call %s %s\n' "$nonce" "$number" "$status" >&2
}
# requeuehold's call 3: clear the jobs' Requeue flags again
call 3 'update' 'JobId=4242,4243,4244' 'Requeue=0'
# The script's exit status is the call's.
exit "$status"
