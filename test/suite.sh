#!/usr/bin/env bash
# The whole suite, as `make test` runs it: every package with -race, the
# longest first (go test starts packages in the order named, so the e2e
# package, which mostly waits on its cluster, is not the tail), and the
# e2e package's multi-node tests in a go test process of their own beside
# it: they run on a cluster of their own (its own names and state
# directory), which their share of the one e2e process would otherwise
# bring up only after the one-node tests. Measured before this split
# (2026-11-28), the suite kept two cores half idle: 22 min user and 11 min
# sys in 33.8 min.
# Usage: test/suite.sh GO PARALLEL PACKAGE...
set -uo pipefail
go=$1 par=$2
shift 2
multi_log=$(mktemp)
trap 'rm -f "$multi_log"' EXIT
"$go" test -count=1 -race -timeout 30m -run '^TestMultiNode_' ./test/e2e >"$multi_log" 2>&1 &
multi=$!
"$go" test -count=1 -race -p "$par" -timeout 30m -skip '^TestMultiNode_' ./test/e2e ./test/e2e/image ./cni/delegate "$@"
rc=$?
wait "$multi"
multi_rc=$?
echo "--- the e2e multi-node tests (go test -run '^TestMultiNode_' ./test/e2e):"
cat "$multi_log"
if [ "$rc" -ne 0 ] || [ "$multi_rc" -ne 0 ]; then
	exit 1
fi
