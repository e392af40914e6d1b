#!/usr/bin/env bash
# Builds the default sandbox image (make sandbox-image) without any registry: a Debian
# `debootstrap --variant=minbase` root filesystem with the packages of
# build/sandbox/packages.txt, a user `agent` (uid/gid 1000) and /workspace, imported with
# `docker import`. The image carries a hash of this script and the package list as a label;
# when the image is tagged already with that label, the build is skipped.
#
# Usage: hack/sandbox-image.sh [IMAGE]   (default managed-agents-sandbox:dev)
# Environment: SANDBOX_MIRROR overrides the Debian mirror, which is otherwise the one apt on
# this machine uses for the suite; SANDBOX_FORCE=1 rebuilds even when the image is current.
#
# Needs root (debootstrap chroots), debootstrap, debian-archive-keyring and the docker CLI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IMAGE=${1:-managed-agents-sandbox:dev}
SUITE=bookworm
PACKAGES_FILE=build/sandbox/packages.txt
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
HASH_LABEL=managed-agents.sandbox-image-hash
# PID 1 of the container: sleeps until SIGTERM, then exits 0 at once. A shell trap instead of
# `sleep infinity` so that `docker stop` works without --init (a PID 1 without a handler
# ignores SIGTERM and is killed only after the stop timeout). `wait` is interruptible by the
# trap; a bare `sleep 3600` in the foreground is not.
ENTRYPOINT='["/bin/sh","-c","trap '"'"'exit 0'"'"' TERM; while :; do sleep 3600 & wait $!; done"]'

log() { printf 'sandbox-image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

packages=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$PACKAGES_FILE" | paste -sd, -)
[ -n "$packages" ] || die "$PACKAGES_FILE lists no packages"
# The inputs that decide the image's content. The mirror is left out on purpose: any mirror
# of the suite serves the same packages.
hash=$(cat "${BASH_SOURCE[0]}" "$PACKAGES_FILE" | sha256sum | cut -c1-32)

# Two test binaries (or a developer and a test) may ask for the image at the same time: one
# builds, the others wait and then find it current.
mkdir -p dist
exec 9>dist/.sandbox-image.lock
flock 9

# Current means: IMAGE is this script's own import (one layer) with this input hash. Images
# built FROM it inherit the label, so the label alone does not say that.
current=$(docker image inspect --format "{{index .Config.Labels \"$HASH_LABEL\"}} {{len .RootFS.Layers}}" \
  "$IMAGE" 2>/dev/null || true)
if [ "$current" = "$hash 1" ] && [ "${SANDBOX_FORCE:-}" != 1 ]; then
  log "$IMAGE is current (input hash $hash); nothing to build"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "debootstrap needs root (run as root, or under sudo)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
[ -f "$KEYRING" ] || die "$KEYRING is missing: apt-get install debian-archive-keyring"

mirror=${SANDBOX_MIRROR:-}
if [ -z "$mirror" ]; then
  # The mirror apt itself uses for the suite's main component, from sources.list(.d).
  mirror=$(apt-get indextargets --format '$(RELEASE) $(COMPONENT) $(REPO_URI)' 'Identifier: Packages' |
    awk -v suite="$SUITE" '$1 == suite && $2 == "main" { print $3; exit }')
  [ -n "$mirror" ] || die "apt has no source for $SUITE main; set SANDBOX_MIRROR=<Debian mirror URL>"
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/sandbox-rootfs.XXXXXX")
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
log "debootstrap $SUITE from $mirror into $root (packages: $packages)"
debootstrap --variant=minbase --keyring="$KEYRING" --include="$packages" \
  "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 || { tail -n 50 "$root.log" >&2; die "debootstrap failed"; }

chroot "$root" groupadd --gid 1000 agent
chroot "$root" useradd --uid 1000 --gid 1000 --create-home --home-dir /home/agent --shell /bin/bash agent
install -d -o 1000 -g 1000 -m 0755 "$root/workspace"

# Smaller and free of this host: no package lists or caches (apt-get update restores the
# lists), no documentation, no logs, and no host files debootstrap copied in (docker mounts
# its own resolv.conf, hostname and hosts).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/var/cache/debconf/*-old \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/usr/share/lintian "$root"/tmp/* "$root"/var/tmp/*
find "$root/var/log" -type f -delete
rm -f "$root/etc/resolv.conf" "$root/etc/hostname" "$root/etc/machine-id"
: >"$root/etc/machine-id"
# Keep apt usable inside the sandbox (the environment's apt packages install from here).
printf 'deb %s %s main\n' "$mirror" "$SUITE" >"$root/etc/apt/sources.list"

previous=$(docker images --quiet "$IMAGE")
log "importing as $IMAGE"
tar --numeric-owner --sort=name -C "$root" -c . | docker import \
  --change 'USER 1000:1000' \
  --change 'WORKDIR /workspace' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  --change "ENTRYPOINT $ENTRYPOINT" \
  --change "LABEL $HASH_LABEL=$hash" \
  --message "hack/sandbox-image.sh $SUITE $hash" \
  - "$IMAGE" >/dev/null
# The image this one replaces would linger untagged; containers still using it keep it.
if [ -n "$previous" ] && [ "$previous" != "$(docker images --quiet "$IMAGE")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
log "built $IMAGE in $((SECONDS - start))s, $(docker image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=iec) (input hash $hash)"
