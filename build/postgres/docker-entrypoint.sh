#!/usr/bin/env bash
# The entrypoint of the PostgreSQL image hack/postgres-image.sh builds from Debian's
# packages (make postgres-image). It keeps the conventions of the official postgres image
# that the chart and its users rely on:
#
#   - PGDATA (default /var/lib/postgresql/data) is initialised when it holds no database:
#     initdb as POSTGRES_USER (default postgres) with the password POSTGRES_PASSWORD, which
#     is required unless POSTGRES_HOST_AUTH_METHOD is trust; POSTGRES_INITDB_ARGS and
#     POSTGRES_INITDB_WALDIR are passed to initdb. Each of POSTGRES_USER, POSTGRES_PASSWORD,
#     POSTGRES_DB and POSTGRES_INITDB_ARGS may come from a file named by <VAR>_FILE instead.
#   - Connections over the network authenticate with POSTGRES_HOST_AUTH_METHOD (default
#     scram-sha-256); the socket and 127.0.0.1 keep initdb's trust (probes use them).
#   - POSTGRES_DB (default POSTGRES_USER) is created, then /docker-entrypoint-initdb.d/ runs
#     in name order: *.sh (run when executable, else sourced), *.sql, *.sql.gz, *.sql.xz,
#     *.sql.zst, through psql as POSTGRES_USER on a server that listens on the socket only.
#   - A data directory that holds a database is used as it is: no initialisation, no scripts.
#   - The server then replaces this script (exec): postgres is PID 1 and gets the signals.
#     It listens on every address (listen_addresses = '*' in the image's sample config).
#   - Started as root, the script prepares the directories and runs itself again as the user
#     postgres (uid 999); started as any other uid (the chart runs it as 999), it runs as
#     that uid, with nss_wrapper naming the uid when /etc/passwd does not.
#
# Commands other than postgres (`docker run IMAGE psql ...`, bash) run as given.
set -Eeuo pipefail
shopt -s nullglob

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# env_or_file VAR [DEFAULT]: VAR from VAR itself, or read from the file VAR_FILE names, or
# DEFAULT; exported, and VAR_FILE unset. Setting both is an error.
env_or_file() {
  local var=$1 default=${2:-} file_var="$1_FILE"
  local value=$default
  if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
    die "both $var and $file_var are set; set one of them"
  fi
  if [ -n "${!var:-}" ]; then
    value=${!var}
  elif [ -n "${!file_var:-}" ]; then
    value=$(<"${!file_var}") || die "cannot read $file_var (${!file_var})"
  fi
  export "$var=$value"
  unset "$file_var"
}

# wants_setup ARGS...: whether ARGS start the server (not postgres --help, -V, -C, ...).
wants_setup() {
  [ "${1:-}" = postgres ] || return 1
  shift
  local arg
  for arg; do
    case "$arg" in
    -'?' | --help | --describe-config | -V | --version | -C | --single) return 1 ;;
    esac
  done
  return 0
}

# As root: make the directories postgres writes its own, then run this script as postgres.
become_postgres() {
  mkdir -p "$PGDATA" /var/run/postgresql
  chmod 3777 /var/run/postgresql
  # Only what is not postgres's already: a large data directory is not walked again.
  find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
  chown postgres:postgres /var/run/postgresql
  chmod 700 "$PGDATA" || true
  if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
    mkdir -p "$POSTGRES_INITDB_WALDIR"
    find "$POSTGRES_INITDB_WALDIR" \! -user postgres -exec chown postgres:postgres '{}' +
    chmod 700 "$POSTGRES_INITDB_WALDIR" || true
  fi
  exec setpriv --reuid=postgres --regid=postgres --init-groups -- "${BASH_SOURCE[0]}" "$@"
}

# An arbitrary uid (OpenShift, --user 4242): initdb and postgres look their user up, so
# nss_wrapper answers for it from files of our own when /etc/passwd has no entry.
name_arbitrary_uid() {
  local uid gid lib
  uid=$(id -u)
  gid=$(id -g)
  getent passwd "$uid" >/dev/null && return 0
  lib=$(compgen -G '/usr/lib/*-linux-gnu/libnss_wrapper.so' | head -n1) ||
    die "uid $uid has no /etc/passwd entry and libnss_wrapper.so is missing"
  if ! NSS_WRAPPER_PASSWD=$(mktemp) || ! NSS_WRAPPER_GROUP=$(mktemp); then
    die "uid $uid has no /etc/passwd entry and \$TMPDIR (${TMPDIR:-/tmp}) is not writable"
  fi
  printf 'postgres:x:%s:%s:PostgreSQL:%s:/bin/false\n' "$uid" "$gid" "$PGDATA" >"$NSS_WRAPPER_PASSWD"
  printf 'postgres:x:%s:\n' "$gid" >"$NSS_WRAPPER_GROUP"
  export LD_PRELOAD=$lib NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
}

init_database() {
  env_or_file POSTGRES_USER postgres
  env_or_file POSTGRES_PASSWORD
  env_or_file POSTGRES_DB "$POSTGRES_USER"
  env_or_file POSTGRES_INITDB_ARGS
  local auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}

  if [ -z "$POSTGRES_PASSWORD" ] && [ "$auth" != trust ]; then
    die "the data directory $PGDATA holds no database and POSTGRES_PASSWORD is not set.
  Set POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) to the password of the user
  \"$POSTGRES_USER\", or POSTGRES_HOST_AUTH_METHOD=trust to let anyone who can reach the
  server connect as any user without a password (never do that on a shared network)."
  fi
  if [ "$auth" = trust ]; then
    log "warning: POSTGRES_HOST_AUTH_METHOD=trust: network connections need no password"
  fi
  if [ ${#POSTGRES_PASSWORD} -gt 100 ]; then
    log "warning: POSTGRES_PASSWORD is longer than 100 characters; psql's prompt would cut it"
  fi

  log "initialising a database cluster in $PGDATA"
  local initdb=(initdb --username="$POSTGRES_USER")
  if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
    initdb+=(--waldir="$POSTGRES_INITDB_WALDIR")
  fi
  # The password through a pipe, never on a command line. POSTGRES_INITDB_ARGS is shell
  # words (quotes allowed), as with the official image.
  if [ -n "$POSTGRES_PASSWORD" ]; then
    eval '"${initdb[@]}" --pwfile=<(printf "%s\n" "$POSTGRES_PASSWORD") '"$POSTGRES_INITDB_ARGS" >&2
  else
    eval '"${initdb[@]}" '"$POSTGRES_INITDB_ARGS" >&2
  fi

  # initdb's pg_hba.conf trusts the socket and loopback; everything else authenticates.
  printf '\n# Added by the image entrypoint: every other connection.\nhost all all all %s\n' \
    "$auth" >>"$PGDATA/pg_hba.conf"

  # A server that only this script can reach (no TCP listener) for the database and the
  # init scripts. PGPASSWORD in case POSTGRES_INITDB_ARGS made the socket ask for one.
  export PGPASSWORD=$POSTGRES_PASSWORD PGUSER=$POSTGRES_USER
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p ${PGPORT:-5432}" -w start >&2

  local psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password --username "$POSTGRES_USER")
  if [ "$POSTGRES_DB" != postgres ]; then
    # psql interpolates :'db' and :"db" in what it reads, not in -c; hence the here-strings.
    if [ -z "$("${psql[@]}" --dbname postgres --tuples-only --no-align --set db="$POSTGRES_DB" \
      <<<"SELECT 1 FROM pg_database WHERE datname = :'db'")" ]; then
      log "creating database $POSTGRES_DB"
      "${psql[@]}" --dbname postgres --quiet --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    fi
  fi

  local f
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
    *.sh)
      if [ -x "$f" ]; then
        log "running $f"
        "$f"
      else
        log "sourcing $f"
        # shellcheck disable=SC1090
        . "$f"
      fi
      ;;
    *.sql) log "running $f" && "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
    *.sql.gz) log "running $f" && gzip -dc "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
    *.sql.xz) log "running $f" && xz -dc "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
    *.sql.zst) log "running $f" && zstd -dc "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
    *) log "ignoring $f" ;;
    esac
  done

  pg_ctl -D "$PGDATA" -m fast -w stop >&2
  unset PGPASSWORD PGUSER
  log "initialisation complete; starting PostgreSQL"
}

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

# `docker run IMAGE -c shared_buffers=1GB` means the server with those options.
if [ "${1:0:1}" = - ]; then
  set -- postgres "$@"
fi

if wants_setup "$@"; then
  if [ "$(id -u)" = 0 ]; then
    become_postgres "$@"
  fi
  # The chart's data volume is owned by root with the pod's fsGroup: PGDATA is a directory
  # below it (a fresh volume may hold lost+found, which initdb refuses), made here.
  mkdir -p "$PGDATA" || die "cannot create $PGDATA as uid $(id -u): mount a volume it can write"
  chmod 700 "$PGDATA" 2>/dev/null || true
  name_arbitrary_uid
  if [ -s "$PGDATA/PG_VERSION" ]; then
    log "$PGDATA holds a database (PostgreSQL $(<"$PGDATA/PG_VERSION")): no initialisation"
  else
    init_database
  fi
fi

exec "$@"
