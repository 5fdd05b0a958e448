# Sourced by tools/test.sh, tools/fuzz.sh and tools/sanitize.sh.
#
#   timed LABEL COMMAND...   runs COMMAND, then prints
#                            "time: LABEL: W s wall, U s user + S s sys"
#                            (CPU of all its processes) and returns its exit
#                            status. When MP_JOB_TIMES names a file (.ci/run
#                            sets it), also appends "LABEL  W s" to it, so CI
#                            ends with every job's wall time.
#
# Commands run under "${timed_wrap[@]}" when a script sets that array
# (tools/sanitize.sh: setarch -R).
timed_wrap=()
timed() {
  local label=$1
  shift
  local TIMEFORMAT="time: $label: %0R s wall, %0U s user + %0S s sys"
  local start=$SECONDS rc=0
  time "${timed_wrap[@]}" "$@" || rc=$?
  if [ -n "${MP_JOB_TIMES:-}" ]; then
    local failed=""
    [ $rc -eq 0 ] || failed="  FAILED (exit $rc)"
    printf '%-20s %5d s%s\n' "$label" $((SECONDS - start)) "$failed" >>"$MP_JOB_TIMES"
  fi
  return $rc
}
