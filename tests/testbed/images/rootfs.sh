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

work=$(mktemp -d "$(dirname "$out")/rootfs.work.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

echo "debootstrap --variant=minbase --include=$include $suite (mirror $mirror)"
debootstrap --variant=minbase --include="$include" "$suite" "$work/root" "$mirror"

root=$work/root
# No package caches, no host-specific identity in the image.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/var/tmp/*
: > "$root/etc/machine-id"
rm -f "$root/etc/hostname" "$root/etc/resolv.conf"

tar --numeric-owner --xattrs -C "$root" -cf "$out.part" .
mv "$out.part" "$out"
echo "rootfs written: $out ($(du -h "$out" | cut -f1))"
