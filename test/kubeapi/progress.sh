# Progress of a cold `go build -v`, sourced by build-kube.sh.
#
#   go build -v ... 2>&1 | build_progress WHAT TOTAL
#
# reads the package names go build -v prints as it compiles them and says,
# at every tenth of TOTAL (the packages go list found stale), how many are
# done, the time spent and an estimate of the time left from the rate so
# far. Other lines (errors) pass through unchanged.

build_progress() {
  local what=$1 total=$2 n=0 next=0 line start=$SECONDS elapsed left pct
  [ "$total" -gt 0 ] || total=1
  while IFS= read -r line; do
    case "$line" in
      *" "* | *:* | "") printf '%s\n' "$line"; continue ;;
    esac
    n=$((n + 1))
    pct=$((100 * n / total))
    [ "$pct" -le 100 ] || pct=100
    if [ "$pct" -ge "$next" ]; then
      elapsed=$((SECONDS - start))
      left=$((elapsed * (total - n) / n))
      [ "$left" -ge 0 ] || left=0
      printf 'build-kube: %s: %d/%d packages (%d%%), %dm%02ds so far, about %dm%02ds left\n' \
        "$what" "$n" "$total" "$pct" $((elapsed / 60)) $((elapsed % 60)) $((left / 60)) $((left % 60))
      next=$((pct - pct % 10 + 10))
    fi
  done
}
