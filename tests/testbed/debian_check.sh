#!/usr/bin/env bash
# Check that the README's commands work on a stock Debian 12 (bookworm) with its system Python.
#
# Usage (as root, on a Debian/Ubuntu host with network access to a Debian mirror and PyPI):
#   tests/testbed/debian_check.sh [CHROOT_DIR] [-- NOX_ARGS...]
# Default CHROOT_DIR: /srv/chroot/osb-bookworm; default nox runs: `--list`, then `-s lint`.
#
# What it does:
#   1. debootstrap a plain bookworm (the default variant: a stock system, with Debian's python3
#      added as a stock Debian 12 install has it; no python3-venv, no pip) into CHROOT_DIR.base
#      once, and copy it afresh to CHROOT_DIR for every check;
#   2. show what a stock system Python lacks (python3-venv; with OSB_CHECK_WITH_PIP=1, the
#      default, also Debian's pip installed to show `pip install nox` refused with PEP 668's
#      externally-managed-environment, the failure the README's commands used to hit);
#   3. copy a clean clone of this repository in (`git clone`, so only committed files; with
#      OSB_CHECK_WORKTREE=1 the uncommitted changes of the working tree are copied on top);
#   4. run `./nox.sh --list` and `./nox.sh -s lint` there as root with the system python3, and
#      print how long each step took.
# Docker is not started in the chroot (that would collide with a dockerd on the host), so the
# sessions that need a testbed (`demo`, `integration`) are not run here.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=/srv/chroot/osb-bookworm
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    root=$1
    shift
fi
if [ "${1:-}" = "--" ]; then shift; fi
# The Debian mirror of this machine's apt sources, as the testbed's image build reads it.
mirror=$(cd "$repo/tests" && python3 -c 'from testbed._images import apt_mirror; print(apt_mirror())')

if [ "$(id -u)" != 0 ]; then
    echo "debian_check: run as root (debootstrap and chroot need it)" >&2
    exit 1
fi
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null

stamp() { date +%s.%N; }
took() { awk -v a="$2" -v b="$(stamp)" -v l="$1" 'BEGIN { printf "%s: %.1f s\n", l, b - a }'; }

mounted=()
proxy_env=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

# A pristine system is kept in $root.base; every check runs in a fresh copy of it ($root).
base=$root.base
t=$(stamp)
if [ ! -x "$base/usr/bin/python3" ]; then
    echo "== debootstrap bookworm into $base (mirror $mirror)"
    rm -rf "$base"
    mkdir -p "$base"
    debootstrap --include=python3,ca-certificates bookworm "$base" "$mirror" >"$base.log" 2>&1 \
        || { tail -20 "$base.log"; exit 1; }
    took "debootstrap" "$t"
else
    echo "== reusing the pristine bookworm system in $base"
fi
t=$(stamp)
# Never delete through a mount left by an interrupted run (its /proc, /sys, /dev).
for m in $(findmnt -rn -o TARGET | grep -F "$root/" | sort -r || true); do umount -l "$m"; done
if findmnt -rn -o TARGET | grep -qF "$root/"; then
    echo "debian_check: something is still mounted under $root: unmount it first" >&2
    exit 1
fi
rm -rf "$root"
cp -a "$base" "$root"
took "fresh copy of it in $root" "$t"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# A machine behind a TLS-inspecting proxy trusts that proxy's CA: give the chroot the same
# extra CA certificates (public certificates only, from /usr/local/share/ca-certificates).
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1
    # pip reads the system store; uv has its own roots unless told where the system bundle is.
    proxy_env=(SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)
    echo "this machine's extra CA certificates added to the chroot's trust store (SSL_CERT_FILE set for uv)"
fi
for fs in proc sys dev dev/pts; do
    mount --bind "/$fs" "$root/$fs"
    mounted+=("$root/$fs")
done

in_chroot() {
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        ${proxy_env[@]+"${proxy_env[@]}"} "$@"
}

echo "== the stock system Python"
in_chroot sh -c '. /etc/os-release; echo "$PRETTY_NAME"; python3 --version'
if in_chroot python3 -c 'import ensurepip' 2>/dev/null; then
    echo "python3-venv: installed (this is not a stock system)"
else
    echo "python3-venv: not installed (python3 -m venv cannot create an environment), as on stock Debian 12"
fi
test -f "$root/usr/lib/python3.11/EXTERNALLY-MANAGED" && echo "EXTERNALLY-MANAGED marker present (PEP 668)"
if [ "${OSB_CHECK_WITH_PIP:-1}" = 1 ]; then
    # Debian's pip, as many Debian 12 machines have it: the README's commands must work there too.
    t=$(stamp)
    in_chroot sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null'
    took "apt-get install python3-pip" "$t"
    if out=$(in_chroot python3 -m pip install nox 2>&1); then
        echo "debian_check: the system pip installed nox: this is not a stock Debian 12" >&2
        exit 1
    fi
    echo "system 'pip install nox' refused, as the issue reported:"
    printf '%s\n' "$out" | grep -m1 -i "externally-managed-environment" | sed 's/^/    /'
fi

echo "== a clean clone of $repo"
rm -rf "$root/srv/repo"
mkdir -p "$root/srv"
git clone -q "$repo" "$root/srv/repo"
if [ "${OSB_CHECK_WORKTREE:-0}" = 1 ]; then
    # Uncommitted work on top of the clone: tracked changes and new files, never ignored ones.
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard) \
        | (cd "$repo" && xargs -0 cp --parents -t "$root/srv/repo" 2>/dev/null || true)
    echo "working tree changes copied on top"
fi

runs=("--list" "-s lint")
[ $# -gt 0 ] && runs=("$*")
status=0
for args in "${runs[@]}"; do
    echo "== ./nox.sh $args (in the chroot, as root, system python3)"
    t=$(stamp)
    # shellcheck disable=SC2086
    if in_chroot sh -c "cd /srv/repo && ./nox.sh $args"; then
        took "./nox.sh $args: ok" "$t"
    else
        took "./nox.sh $args: FAILED" "$t"
        status=1
    fi
done
exit $status
