#!/usr/bin/env bash
# Builds the egress proxy image (make egress-image) without any registry: the static
# managed-agents binary (CGO_ENABLED=0), the CA bundle and an /etc/passwd naming the
# non-root user 65532, imported with `docker import` as one layer. The docker sandbox
# provider runs `/managed-agents egress-proxy` from it. The image carries the binary's hash
# as a label; when the tag already has that hash, the import is skipped (the build itself is
# incremental through Go's build cache).
#
# Usage: hack/egress-image.sh [IMAGE]   (default managed-agents-egress:dev)
# Environment: EGRESS_FORCE=1 imports even when the image is current.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IMAGE=${1:-managed-agents-egress:dev}
HASH_LABEL=managed-agents.egress-image-hash
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}

log() { printf 'egress-image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ -f "$CA_BUNDLE" ] || die "$CA_BUNDLE is missing: apt-get install ca-certificates"
mkdir -p dist
exec 9>dist/.egress-image.lock
flock 9

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc/ssl/certs" "$root/tmp"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$root/managed-agents" .
cp "$CA_BUNDLE" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"

hash=$( (sha256sum "$root/managed-agents" "${BASH_SOURCE[0]}" | cut -d' ' -f1) | sha256sum | cut -c1-32)
current=$(docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}}" "$IMAGE" 2>/dev/null || true)
if [ "$current" = "$hash" ] && [ "${EGRESS_FORCE:-}" != 1 ]; then
  log "$IMAGE is current (hash $hash); nothing to import"
  exit 0
fi

# Fixed owners and times, so the same binary gives the same layer.
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$root" -c . |
  docker import \
    --change 'USER 65532:65532' \
    --change 'ENTRYPOINT ["/managed-agents"]' \
    --change 'CMD ["egress-proxy"]' \
    --change 'EXPOSE 3128' \
    --change "LABEL $HASH_LABEL=$hash" \
    - "$IMAGE" >/dev/null
log "imported $IMAGE (hash $hash)"
