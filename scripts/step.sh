# step NAME CMD...: runs one timed step of a background track (scripts/checks.sh,
# scripts/lane-2.sh) and prints "timing: NAME Ns", which scripts/test-all.sh
# collects into its phase table. A failing step ends the track.
step() {
  local name=$1 t0=$SECONDS; shift
  echo "=== step $name: $*"
  if ! "$@"; then
    echo "=== step $name FAILED after $((SECONDS - t0))s"
    exit 1
  fi
  echo "timing: $(printf '%-18s' "$name") $((SECONDS - t0))s"
}
