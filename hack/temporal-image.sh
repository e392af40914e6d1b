#!/usr/bin/env bash
# Builds the Temporal dev server image of the chart (make temporal-image) without any
# registry: the pinned Temporal CLI (TEMPORAL_VERSION in the Makefile) as a static binary, a
# CA bundle, an /etc/passwd naming the non-root user temporal (uid/gid 1000), /tmp and a /data
# directory that user owns (both writable by any uid), imported with `docker import` as one
# layer. It has the layout of the official temporalio/temporal image (scratch, /temporal as the
# entrypoint, user 1000), so the chart's dev server Deployment runs it unchanged with
# `server start-dev ...`.
#
# The binary is bin/temporal-<version> when `make tools` built it static (CGO_ENABLED=0);
# otherwise one is built static, stripped, into ~/.cache/managed-agents/temporal/ once per
# version. The image carries a hash of the binary and this script as a label; when the tag
# already has that hash, the import is skipped.
#
# Usage: hack/temporal-image.sh [IMAGE]   (default managed-agents-temporal:<version>)
# Environment: TEMPORAL_VERSION overrides the Makefile's pin; TEMPORAL_IMAGE_FORCE=1 imports
# even when the image is current.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VERSION=${TEMPORAL_VERSION:-$(sed -n 's/^TEMPORAL_VERSION[[:space:]]*?=[[:space:]]*//p' Makefile)}
IMAGE=${1:-managed-agents-temporal:${VERSION#v}}
MODULE=github.com/temporalio/cli
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
HASH_LABEL=managed-agents.temporal-image-hash
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/managed-agents/temporal
# The official image's user.
UID_GID=1000

log() { printf 'temporal-image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ -n "$VERSION" ] || die "no TEMPORAL_VERSION in the Makefile"
[ -f "$CA_BUNDLE" ] || die "$CA_BUNDLE is missing: apt-get install ca-certificates"
mkdir -p dist
exec 9>dist/.temporal-image.lock
flock 9

# static FILE: FILE is the CLI at VERSION, built with CGO_ENABLED=0 (no libc to carry).
static() {
  local info
  info=$(go version -m "$1" 2>/dev/null) || return 1
  grep -q "^[[:space:]]*mod[[:space:]]*${MODULE}[[:space:]]*${VERSION}[[:space:]]" <<<"$info" &&
    grep -q "^[[:space:]]*build[[:space:]]*CGO_ENABLED=0\$" <<<"$info"
}

binary=bin/temporal-$VERSION
if ! static "$binary"; then
  binary=$CACHE/temporal-$VERSION
  if ! static "$binary"; then
    log "bin/temporal-$VERSION is missing or links libc: building $MODULE@$VERSION with CGO_ENABLED=0 into $CACHE (minutes)"
    start=$SECONDS
    tmp=$(mktemp -d)
    # A failed or interrupted build leaves nothing in the cache.
    trap 'rm -rf "$tmp"' EXIT
    # As the Makefile's pin and the CLI's release build: static, stripped, the version stamped.
    CGO_ENABLED=0 GOBIN=$tmp go install -trimpath \
      -ldflags="-s -w -X $MODULE/temporalcli.Version=${VERSION#v}" "$MODULE/cmd/temporal@$VERSION"
    mkdir -p "$CACHE"
    mv "$tmp/temporal" "$binary"
    rm -rf "$tmp"
    trap - EXIT
    log "built $binary in $((SECONDS - start))s"
  fi
fi

hash=$( (sha256sum "$binary" "${BASH_SOURCE[0]}" | cut -d' ' -f1) | sha256sum | cut -c1-32)
current=$(docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}} {{len .RootFS.Layers}}" \
  "$IMAGE" 2>/dev/null || true)
if [ "$current" = "$hash 1" ] && [ "${TEMPORAL_IMAGE_FORCE:-}" != 1 ]; then
  log "$IMAGE is current (hash $hash); nothing to import"
  exit 0
fi

root=$(mktemp -d)
trap 'rm -rf "$root" "$root.tar"' EXIT
mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/data"
cp "$binary" "$root/temporal"
chmod 0755 "$root/temporal"
cp "$CA_BUNDLE" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\ntemporal:x:%s:%s:temporal:/data:/sbin/nologin\n' \
  "$UID_GID" "$UID_GID" >"$root/etc/passwd"
printf 'root:x:0:\ntemporal:x:%s:\n' "$UID_GID" >"$root/etc/group"
# /data world-writable (sticky, as /tmp) besides the user's own: `docker run --tmpfs /data`
# copies the mode of the image's directory onto the tmpfs but leaves it owned by root, and
# another --user must be able to write it too. (A Kubernetes emptyDir is 0777 anyway.)
chmod 1777 "$root/tmp" "$root/data"

# Fixed times; owners root, but /data the user's (without needing root here to chown it).
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$root" -cf "$root.tar" etc temporal tmp
tar --numeric-owner --owner="$UID_GID" --group="$UID_GID" --mtime=@0 -C "$root" -rf "$root.tar" data
previous=$(docker images --quiet "$IMAGE")
docker import \
  --change "USER $UID_GID:$UID_GID" \
  --change 'ENTRYPOINT ["/temporal"]' \
  --change 'EXPOSE 7233 8233' \
  --change "LABEL $HASH_LABEL=$hash" \
  --message "hack/temporal-image.sh $MODULE $VERSION $hash" \
  "$root.tar" "$IMAGE" >/dev/null
if [ -n "$previous" ] && [ "$previous" != "$(docker images --quiet "$IMAGE")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
log "imported $IMAGE ($MODULE $VERSION, $(docker image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=iec), hash $hash)"
