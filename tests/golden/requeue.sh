# slurm-dsl requeue 4242: rendered by slurm_dsl.script; runs under dash and bash
PATH=/usr/sbin:/usr/bin:/sbin:/bin; export PATH
# This script's nonce, the scontrol it runs, the deadline (ms since the epoch), the
# seconds from TERM to KILL at the deadline, and the status of the last call.
nonce='9f3c2a7b1e4d5f60718293a4b5c6d7e8' scontrol='/usr/bin/scontrol'
deadline_ms=1767225600500 grace=1 status=0
# call NUMBER ARGS...: run scontrol ARGS unless the deadline has passed, then print its status line.
call() {
  number=$1; shift
  # The wall clock in milliseconds; a clock that cannot be read is the wrapper failing (125).
  now_ms=$(date +%s%3N) || now_ms=
  case $now_ms in
    ''|*[!0-9]*) status=125 ;;
    *)
      left_ms=$((deadline_ms - now_ms))
      if [ "$left_ms" -gt 0 ]; then
        # Run it for the time left: TERM at the deadline (124), KILL $grace s later (137).
        frac=$((left_ms % 1000 + 1000))
        timeout --foreground -k "$grace" "$((left_ms / 1000)).${frac#1}" "$scontrol" "$@" </dev/null
        status=$?
      else
        # The deadline has passed: the call is not started.
        status=75
      fi ;;
  esac
  # The status line on stderr: RS, "DSL", the nonce, the call number, its status.
  printf '\036DSL %s call %s %s\n' "$nonce" "$number" "$status" >&2
}
# 1: set the job's Requeue flag
call 1 'update' 'JobId=4242' 'Requeue=1'
first=$status
# 2: requeue the job, only if call 1 succeeded
[ "$first" -ne 0 ] || call 2 'requeue' '4242'
# 3: clear the Requeue flag again, unless call 1 never started
[ "$first" -eq 75 ] || call 3 'update' 'JobId=4242' 'Requeue=0'
# The script's exit status is the last call's.
exit "$status"
