#!/usr/bin/env bash
# Builds a PostgreSQL image for the chart's bundled database (make postgres-image) without any
# registry: a Debian `debootstrap --variant=minbase` root filesystem with Debian's own
# postgresql-15, imported with `docker import`. It keeps the official postgres image's
# conventions, so the chart runs it unchanged in place of postgres:15: the user postgres with
# uid and gid 999, PGDATA /var/lib/postgresql/data, the server's programs on PATH, LANG
# en_US.utf8, listen_addresses '*', and an entrypoint of its own
# (build/postgres/docker-entrypoint.sh) that reads POSTGRES_USER, POSTGRES_PASSWORD,
# POSTGRES_DB, initialises an empty data directory once, runs /docker-entrypoint-initdb.d/ and
# execs postgres. The image carries a hash of this script and the entrypoint as a label; when
# the image is tagged already with that label, the build is skipped.
#
# The packages debootstrap fetches are kept under ~/.cache/managed-agents/debootstrap/ (only
# those of the last build), so a rebuild downloads only the package lists.
#
# Usage: hack/postgres-image.sh [IMAGE]   (default managed-agents-postgres:15)
# Environment: POSTGRES_MIRROR (or SANDBOX_MIRROR) overrides the Debian mirror, which is
# otherwise the one apt on this machine uses for the suite; POSTGRES_FORCE=1 rebuilds even
# when the image is current.
#
# Needs root (debootstrap chroots), debootstrap, debian-archive-keyring and the docker CLI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IMAGE=${1:-managed-agents-postgres:15}
SUITE=bookworm
PG_MAJOR=15
# The server, the en_US.UTF-8 locale the official image uses, nss_wrapper for arbitrary uids,
# and the decompressors of the init scripts' *.sql.xz and *.sql.zst.
PACKAGES=postgresql-$PG_MAJOR,locales,libnss-wrapper,xz-utils,zstd
ENTRYPOINT_FILE=build/postgres/docker-entrypoint.sh
# The official image's postgres user and group.
PG_UID=999
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
HASH_LABEL=managed-agents.postgres-image-hash
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/debootstrap/$SUITE

log() { printf 'postgres-image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The inputs that decide the image's content (the package list is in this script). The
# mirror is left out on purpose: any mirror of the suite serves the same packages.
hash=$(cat "${BASH_SOURCE[0]}" "$ENTRYPOINT_FILE" | sha256sum | cut -c1-32)

mkdir -p dist
exec 9>dist/.postgres-image.lock
flock 9

# Current means: IMAGE is this script's own build (one layer) with this input hash.
current=$(docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}} {{len .RootFS.Layers}}" \
  "$IMAGE" 2>/dev/null || true)
if [ "$current" = "$hash 1" ] && [ "${POSTGRES_FORCE:-}" != 1 ]; then
  log "$IMAGE is current (input hash $hash); nothing to build"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "debootstrap needs root (run as root, or under sudo)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
[ -f "$KEYRING" ] || die "$KEYRING is missing: apt-get install debian-archive-keyring"

mirror=${POSTGRES_MIRROR:-${SANDBOX_MIRROR:-}}
if [ -z "$mirror" ]; then
  # The mirror apt itself uses for the suite's main component, from sources.list(.d).
  mirror=$(apt-get indextargets --format '$(RELEASE) $(COMPONENT) $(REPO_URI)' 'Identifier: Packages' |
    awk -v suite="$SUITE" '$1 == suite && $2 == "main" { print $3; exit }')
  [ -n "$mirror" ] || die "apt has no source for $SUITE main; set POSTGRES_MIRROR=<Debian mirror URL>"
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/postgres-rootfs.XXXXXX")
cleanup() {
  rm -f "$root.log"
  # debootstrap mounts /proc, /sys (and on some hosts binds /dev) inside the target; a failed
  # run can leave them mounted, and removing through them would reach the host's.
  local m
  for m in $(awk -v r="$root" 'index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" || true
  done
  if awk -v r="$root" 'index($2, r "/") == 1 { found = 1 } END { exit !found }' /proc/mounts; then
    log "leaving $root in place: something is still mounted below it"
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT

start=$SECONDS
mkdir -p "$CACHE"
log "debootstrap $SUITE from $mirror into $root (packages: $PACKAGES; cache $CACHE)"
debootstrap --variant=minbase --keyring="$KEYRING" --include="$PACKAGES" --cache-dir="$CACHE" \
  "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 || { tail -n 50 "$root.log" >&2; die "debootstrap failed"; }
# The cache keeps what this build used, not every version a point release replaced.
for deb in "$CACHE"/*.deb; do
  [ -e "$root/var/cache/apt/archives/${deb##*/}" ] || rm -f "$deb"
done

# postgresql-common made a cluster "main" as the packaging does on a server; the image makes
# its own in PGDATA at the first start.
rm -rf "$root/etc/postgresql/$PG_MAJOR" "$root/var/lib/postgresql/$PG_MAJOR"

# The package made postgres a system user with the next free ids; the official image's are
# 999, which the chart's securityContext names.
old_uid=$(chroot "$root" id -u postgres)
old_gid=$(chroot "$root" id -g postgres)
for db in passwd group; do
  holder=$(chroot "$root" getent "$db" "$PG_UID" | cut -d: -f1 || true)
  [ -z "$holder" ] || [ "$holder" = postgres ] || die "$db id $PG_UID is taken by $holder in the root filesystem"
done
chroot "$root" groupmod --gid "$PG_UID" postgres
chroot "$root" usermod --uid "$PG_UID" --gid "$PG_UID" postgres
find "$root" -xdev -uid "$old_uid" -exec chown -h "$PG_UID" '{}' +
find "$root" -xdev -gid "$old_gid" -exec chgrp -h "$PG_UID" '{}' +

# The official image's locale (collations of databases it made need it here too).
chroot "$root" localedef -i en_US -c -f UTF-8 -A /usr/share/locale/locale.alias en_US.UTF-8
# initdb copies this sample into each new data directory: listen on every address.
sed -ri "s/^#?(listen_addresses)[[:space:]]*=[[:space:]]*'[^']*'/\1 = '*'/" \
  "$root/usr/share/postgresql/$PG_MAJOR/postgresql.conf.sample"
grep -q "^listen_addresses = '\*'" "$root/usr/share/postgresql/$PG_MAJOR/postgresql.conf.sample" ||
  die "postgresql.conf.sample has no listen_addresses line to set"

install -m 0755 "$ENTRYPOINT_FILE" "$root/usr/local/bin/docker-entrypoint.sh"
install -d -m 0755 "$root/docker-entrypoint-initdb.d"
# Writable by any uid that runs the server (the chart mounts volumes over both).
install -d -o "$PG_UID" -g "$PG_UID" -m 1777 "$root/var/lib/postgresql/data"
install -d -o "$PG_UID" -g "$PG_UID" -m 3777 "$root/run/postgresql"

pg_version=$(chroot "$root" dpkg-query --showformat='${Version}' --show "postgresql-$PG_MAJOR")

# Smaller and free of this host: no package lists or caches, no documentation, translations or
# logs, no host files debootstrap copied in, and no snakeoil TLS key made at build time (one
# key in every copy of the image; the server does not use it).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/var/cache/debconf/*-old \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/usr/share/lintian "$root"/tmp/* "$root"/var/tmp/*
find "$root/var/log" -type f -delete
rm -f "$root/etc/ssl/private/ssl-cert-snakeoil.key" "$root/etc/ssl/certs/ssl-cert-snakeoil.pem"
rm -f "$root/etc/resolv.conf" "$root/etc/hostname" "$root/etc/machine-id"
: >"$root/etc/machine-id"
printf 'deb %s %s main\n' "$mirror" "$SUITE" >"$root/etc/apt/sources.list"

previous=$(docker images --quiet "$IMAGE")
log "importing as $IMAGE (postgresql-$PG_MAJOR $pg_version)"
# Root, as the official image: the entrypoint drops to postgres; the chart runs it as 999.
imported=managed-agents-postgres-import:$hash
tar --numeric-owner --sort=name -C "$root" -c . | docker import \
  --change "ENV PATH=/usr/lib/postgresql/$PG_MAJOR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV LANG=en_US.utf8 PG_MAJOR=$PG_MAJOR PG_VERSION=$pg_version PGDATA=/var/lib/postgresql/data" \
  --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  --change 'CMD ["postgres"]' \
  --change 'EXPOSE 5432' \
  --change 'VOLUME /var/lib/postgresql/data' \
  --change "LABEL $HASH_LABEL=$hash" \
  --message "hack/postgres-image.sh $SUITE postgresql-$PG_MAJOR $pg_version $hash" \
  - "$imported" >/dev/null
# docker import takes no STOPSIGNAL. SIGINT is postgres's fast shutdown: `docker stop` ends
# the sessions and stops at once (SIGTERM would wait for every client to go). A metadata-only
# step on the imported image: still one layer.
out=$(printf 'FROM %s\nSTOPSIGNAL SIGINT\n' "$imported" | docker build --quiet --tag "$IMAGE" - 2>&1) ||
  { printf '%s\n' "$out" >&2; die "docker build (STOPSIGNAL) failed"; }
docker rmi "$imported" >/dev/null
# The image this one replaces would linger untagged; containers still using it keep it.
if [ -n "$previous" ] && [ "$previous" != "$(docker images --quiet "$IMAGE")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
log "built $IMAGE in $((SECONDS - start))s, $(docker image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=iec) (input hash $hash)"
