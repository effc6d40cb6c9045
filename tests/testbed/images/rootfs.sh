#!/usr/bin/env bash
# Build the Debian minbase root filesystem of the testbed's sandbox image as a tarball.
# Usage: rootfs.sh OUT.tar MIRROR_URL [SUITE]
# The mirror is passed in by the caller (read from the machine's apt sources).
set -euo pipefail

out=$1
mirror=$2
suite=${3:-bookworm}
here=$(cd "$(dirname "$0")" && pwd)
include=$(grep -v '^[[:space:]]*#' "$here/packages.txt" | xargs | tr ' ' ',')
extra=$(grep -v '^[[:space:]]*#' "$here/apt-packages.txt" 2>/dev/null | xargs || true)

work=$(mktemp -d "$(dirname "$out")/rootfs.work.XXXXXX")
cleanup() {
    umount "$work/root/proc" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "debootstrap --variant=minbase --include=$include $suite (mirror $mirror)"
debootstrap --variant=minbase --include="$include" "$suite" "$work/root" "$mirror"

root=$work/root
if [ -n "$extra" ]; then
    # apt inside the new root (it shares this machine's network), without recommends.
    echo "apt-get install --no-install-recommends $extra"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    mount -t proc proc "$root/proc"
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $extra && apt-get clean"
    umount "$root/proc"
fi
# No package caches, no host-specific identity in the image.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/var/tmp/*
: > "$root/etc/machine-id"
rm -f "$root/etc/hostname" "$root/etc/resolv.conf"

tar --numeric-owner --xattrs -C "$root" -cf "$out.part" .
mv "$out.part" "$out"
echo "rootfs written: $out ($(du -h "$out" | cut -f1))"
