#!/usr/bin/env bash
# What the tests need beyond Python and make, from Debian's packages. Checks for each
# file below; installs the packages of the missing ones with apt, as root or through
# `sudo -n`; else stops with one message naming the packages and the command. It calls
# apt only when something is missing, so `make test` pays nothing once they are there.
#
# To try the install path without installing, with the files hidden from it (apt-get
# --simulate, no update):
#   PREREQUISITES_ROOT=/nonexistent PREREQUISITES_DRY_RUN=1 scripts/prerequisites.sh
set -euo pipefail

# Where the files are looked for: / unless set (to try the decision logic).
ROOT=${PREREQUISITES_ROOT:-}
DRY_RUN=${PREREQUISITES_DRY_RUN:-}

# A file a test runs, and the Debian package that installs it.
REQUIRED=(
    # tests/support/pgbouncer.py: PgBouncer, and psql for its admin console
    "/usr/sbin/pgbouncer pgbouncer"
    "/usr/bin/psql postgresql-client"
    # tests/support/pg_server.py: the fault tests' own PostgreSQL 15 servers
    "/usr/lib/postgresql/15/bin/initdb postgresql-15"
    "/usr/lib/postgresql/15/bin/pg_ctl postgresql-15"
    "/usr/lib/postgresql/15/bin/postgres postgresql-15"
    # tests/unit/test_webhook_handler.py: a self-signed certificate
    "/usr/bin/openssl openssl"
    # tests/support/browser.py: the dashboard's tests drive a headless Chromium
    "/usr/bin/chromium chromium"
    "/usr/bin/chromedriver chromium-driver"
)

# Adds a package to `packages` unless it is there.
add_package() {
    [[ " ${packages[*]} " == *" $1 "* ]] || packages+=("$1")
}

# Sets `missing` (files), `packages` (theirs, each once) and `found` (files' names).
find_missing() {
    missing=()
    packages=()
    found=()
    local entry file package
    for entry in "${REQUIRED[@]}"; do
        read -r file package <<<"$entry"
        if [[ -x $ROOT$file ]]; then
            found+=("${file##*/}")
        else
            missing+=("$ROOT$file")
            add_package "$package"
        fi
    done
    # As root, the servers and PgBouncer run as the `postgres` user (they refuse root),
    # which Debian's postgresql-common creates.
    if ((EUID == 0)) && ! getent passwd postgres >/dev/null; then
        missing+=("the postgres user")
        # postgresql-15, if it is to be installed, brings postgresql-common.
        [[ " ${packages[*]} " == *" postgresql-15 "* ]] || add_package postgresql-common
    fi
}

# One message (what is missing, why it was not installed, the command that installs
# it), then exit 1.
stop() {
    {
        echo "prerequisites: the tests need Debian's packages ${packages[*]}"
        echo "  (missing: ${missing[*]});"
        echo "  $1. Install them, then run make test again:"
        echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages[*]}"
    } >&2
    exit 1
}

find_missing
if ((${#missing[@]} == 0)); then
    echo "prerequisites: all found (${found[*]})"
    exit 0
fi

if ! command -v apt-get >/dev/null; then
    stop "there is no apt-get here to install them"
fi
if ((EUID == 0)); then
    as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    stop "installing them takes root or a sudo that asks no password (sudo -n)"
fi

echo "prerequisites: installing ${packages[*]} with apt (missing: ${missing[*]})"
if [[ -n $DRY_RUN ]]; then
    apt-get install --simulate --no-install-recommends "${packages[@]}"
    exit
fi

# Debian's postgresql-15 creates a `main` cluster on port 5432 and starts it; the tests
# make servers of their own, so keep that one from being created (postgresql-common
# reads createcluster.d). The file goes once apt is done, leaving the machine's defaults.
no_main_cluster=/etc/postgresql-common/createcluster.d/jobqueue-tests-no-main-cluster.conf
if [[ " ${packages[*]} " == *" postgresql-15 "* ]]; then
    if [[ -d ${no_main_cluster%/*} ]]; then
        trap '"${as_root[@]}" rm -f "$no_main_cluster"' EXIT
    else
        trap '"${as_root[@]}" rm -rf "${no_main_cluster%/*}"' EXIT
        "${as_root[@]}" mkdir -p "${no_main_cluster%/*}"
    fi
    echo "create_main_cluster = false" | "${as_root[@]}" tee "$no_main_cluster" >/dev/null
fi

if ! "${as_root[@]}" apt-get update -qq ||
    ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${packages[@]}" >/dev/null; then
    stop "apt-get could not install them (its errors are above)"
fi

installed=("${packages[@]}")
find_missing
if ((${#missing[@]} > 0)); then
    stop "apt-get installed them, yet these are still missing"
fi
echo "prerequisites: installed ${installed[*]}"
