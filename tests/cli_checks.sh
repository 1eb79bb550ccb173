# Sourced by the command-line test scripts: `check` runs a command that must succeed, `check_error`
# one that must fail with a message on stderr; both print ok / FAIL and count failures in
# $failures. They write the command's output to $work/out.txt and $work/err.txt.
failures=0

check() {  # check NAME COMMAND... : the command must succeed
  local name="$1"; shift
  if ! "$@" > "$work/out.txt" 2> "$work/err.txt"; then
    echo "FAIL $name: exit $? ($(tail -3 "$work/err.txt"))"; failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

check_error() {  # check_error NAME EXPECTED_TEXT COMMAND... : non-zero exit, message on stderr
  local name="$1" expected="$2"; shift 2
  "$@" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$?
  if [ $rc -eq 0 ]; then
    echo "FAIL $name: exited 0"; failures=$((failures + 1))
  elif ! grep -qF -- "$expected" "$work/err.txt"; then
    echo "FAIL $name: stderr lacks '$expected': $(cat "$work/err.txt")"; failures=$((failures + 1))
  else
    echo "ok   $name (exit $rc)"
  fi
}
