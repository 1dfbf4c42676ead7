#!/usr/bin/env bash
# The whole pytest suite, as `make test` runs it: the tests marked `idle` (they wait for
# minutes with next to nothing to compute: the three-minute job) in a pytest of their own,
# beside the rest on one parallel worker per core. On a worker they held it for minutes
# (184 s of a 2-core run's 1,578 s of tests) while it sat idle.
#
# (Why xdist steals work between its workers: pyproject.toml's addopts.)
#
# The idle run's output goes to build/idle-tests.log and is shown once both are done;
# the exit status is the first failure's, else 0. Arguments go to the parallel run.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=${PYTEST:-.venv/bin/pytest}
mkdir -p build
log=build/idle-tests.log

# The project's own modules compiled once (the installed packages are, by `make install`):
# under PYTHONDONTWRITEBYTECODE each process the tests start would compile them again.
"$(dirname "$PYTEST")/python" -m compileall -q src >/dev/null

# -p no:cacheprovider: the two runs would otherwise both write .pytest_cache.
"$PYTEST" -m idle -p no:cacheprovider >"$log" 2>&1 &
idle=$!
# Both runs end on a signal to this script (make interrupted, CI cancelled).
trap 'kill "$idle" 2>/dev/null' EXIT

"$PYTEST" -n auto -m 'not docker and not idle' "$@"
parallel=$?
wait "$idle"
alone=$?
trap - EXIT

echo "--- the idle tests, run beside the others (${log}) ---"
tail -n 30 "$log"
if [ "$parallel" -ne 0 ]; then
    exit "$parallel"
fi
exit "$alone"
