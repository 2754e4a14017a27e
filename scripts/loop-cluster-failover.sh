#!/bin/sh
# Run the Redis Cluster failover fault test (test/faults/cluster-failover.test.ts) N times in a row
# (default 10), each case on a fresh 6-node Cluster of its own: the race it guards against shows only
# now and then. Run it alone on the host (it starts 6 redis-servers and 3 vcfleet workers per case).
#   scripts/loop-cluster-failover.sh 10
set -eu
cd "$(dirname "$0")/.."
VCFLEET_FAULT_LOOP="${1:-10}" exec npx vitest run --config vitest.faults.config.ts test/faults/cluster-failover.test.ts
