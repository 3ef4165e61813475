#!/usr/bin/env bash
# Makes sure PostgreSQL answers on 127.0.0.1:5432, lets user `postgres` in without a password
# over local TCP (trust), and has a database `test`: what the store's PostgreSQL tests use.
# Installs Debian's `postgresql` if it is missing and starts the cluster if it is down.
# Idempotent: when everything is in place it changes nothing.
set -euo pipefail

host=127.0.0.1
port=5432

say() { echo "postgres.sh: $*" >&2; }

answers() { pg_isready -h "$host" -p "$port" -q 2>/dev/null; }

root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo -- "$@"; fi
}

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls -d /etc/postgresql/*/ >/dev/null 2>&1; then
    say "installing PostgreSQL"
    export DEBIAN_FRONTEND=noninteractive
    root apt-get update -qq
    root apt-get install -y -qq postgresql >/dev/null
fi

version=$(ls /etc/postgresql | sort -V | tail -n 1)
conf=/etc/postgresql/$version/main
if [ ! -d "$conf" ]; then
    say "creating cluster $version/main"
    root pg_createcluster "$version" main
fi

# Trust for local TCP connections, ahead of any password rule.
reload=no
hba=$conf/pg_hba.conf
if ! grep -Eq "^host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust" "$hba"; then
    say "allowing trust authentication from $host in $hba"
    root sed -i "1i host all all 127.0.0.1/32 trust" "$hba"
    reload=yes
fi

if ! answers; then
    say "starting cluster $version/main"
    root pg_ctlcluster --skip-systemctl-redirect "$version" main start
elif [ "$reload" = yes ]; then
    root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
fi

for _ in $(seq 1 60); do
    answers && break
    sleep 0.5
done
if ! answers; then
    say "PostgreSQL does not answer on $host:$port"
    exit 1
fi

# The reload above (if any) takes a moment; retry the first query briefly.
for _ in $(seq 1 20); do
    if psql -h "$host" -p "$port" -U postgres -d postgres -tAc "SELECT 1" >/dev/null 2>&1; then
        break
    fi
    sleep 0.5
done
if [ "$(psql -h "$host" -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'")" != 1 ]; then
    say "creating database test"
    psql -h "$host" -p "$port" -U postgres -d postgres -qc "CREATE DATABASE test"
fi
say "PostgreSQL answers on $host:$port (database test, user postgres, trust)"
