#!/usr/bin/env bash
# Benchmark: the autoscaling policies on the Faro trace (data/traces), three cluster
# sizes, five seeds, in one run of gantry-autoscale-sim (the scheduler's policy code).
# Days 8-10 of the trace: day 8 feeds the predictors (not measured), days 9-10 are
# measured (12 simulated hours).  A few minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec "${GANTRY_BUILD:-build}/scheduler/autoscale/gantry-autoscale-sim" --trace data/traces/faro_days01-10.jsonl \
    --minutes 2520:3600 --warmup 360 --capacity "${CAPACITY:-28,32,36}" --seeds "${SEEDS:-5}" "$@"
