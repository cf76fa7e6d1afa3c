#!/usr/bin/env bash
# The whole suite, as `make test` runs it: every package with -race, the
# longest first (go test starts packages in the order named, so the e2e
# package, which mostly waits on its cluster, is not the tail), and two
# more go test processes of the e2e package beside it, each on a cluster
# of its own (its own names and state directory): the multi-node tests,
# which their share of the one e2e process would otherwise bring up only
# after the one-node tests, and the longest one-node tests, on a second
# one-node cluster. Measured before the multi-node split (2026-11-28),
# the suite kept two cores half idle: 22 min user and 11 min sys in 33.8
# min; before the second one-node cluster (2026-12-02, 2 vCPU AMD EPYC),
# the e2e package took 1683 s of the suite's 1765, 731 of them in the
# five tests it now runs beside the rest.
# Usage: test/suite.sh GO PARALLEL PACKAGE...
set -uo pipefail
go=$1 par=$2
shift 2
longest='TestKEP4817_NetworkClaims|TestSwitchdevRepresentor|TestPodChurnLeaksNothing|TestDevicePluginCDI|TestDRADriverPerClaim'
multi_log=$(mktemp) longest_log=$(mktemp)
trap 'rm -f "$multi_log" "$longest_log"' EXIT
"$go" test -count=1 -race -timeout 30m -run '^TestMultiNode_' ./test/e2e >"$multi_log" 2>&1 &
multi=$!
HWNET_E2E_NAME=hwnet-e2e-long "$go" test -count=1 -race -timeout 30m -run "^($longest)\$" ./test/e2e >"$longest_log" 2>&1 &
longest_pid=$!
"$go" test -count=1 -race -p "$par" -timeout 30m -skip "^(TestMultiNode_.*|$longest)\$" ./test/e2e ./test/e2e/image ./cni/delegate "$@"
rc=$?
wait "$multi"
multi_rc=$?
wait "$longest_pid"
longest_rc=$?
echo "--- the e2e multi-node tests (go test -run '^TestMultiNode_' ./test/e2e):"
cat "$multi_log"
echo "--- the longest one-node e2e tests, on a cluster of their own (HWNET_E2E_NAME=hwnet-e2e-long go test -run '^($longest)\$' ./test/e2e):"
cat "$longest_log"
if [ "$rc" -ne 0 ] || [ "$multi_rc" -ne 0 ] || [ "$longest_rc" -ne 0 ]; then
	exit 1
fi
