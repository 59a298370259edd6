# slurm-dsl hold 4242: rendered by slurm_dsl.script; runs under dash and bash
PATH=/usr/sbin:/usr/bin:/sbin:/bin; export PATH
n='9f3c2a7b1e4d5f60718293a4b5c6d7e8' c='/usr/bin/scontrol' d=1767225600500 g=1 s=0
r() {
  i=$1; shift
  t=$(date +%s%3N) || t=
  case $t in
    ''|*[!0-9]*) s=125 ;;
    *)
      t=$((d - t))
      if [ "$t" -gt 0 ]; then
        f=$((t % 1000 + 1000))
        timeout --foreground -k "$g" "$((t / 1000)).${f#1}" "$c" "$@" </dev/null
        s=$?
      else
        s=75
      fi ;;
  esac
  printf '\036DSL %s call %s %s\n' "$n" "$i" "$s" >&2
}
r 1 'hold' '4242'
s1=$s
exit "$s"
