#!/usr/bin/env bash
# Build the code interpreter's layer of the code-interpreter image as a tarball: a virtual
# environment /opt/jupyter made by the image's own python3 (in a chroot of the sandbox image's
# root filesystem), with the packages of jupyter-requirements.txt installed from wheels the caller
# downloaded (no network here), the kernelspecs `python` (`ipykernel install --name python`, as
# upstream's image) and `bash` (bash_kernel), and matplotlib's font cache built for root.
# Usage: jupyter.sh OUT.tar ROOTFS.tar WHEELS_DIR
set -euo pipefail

out=$1
rootfs=$2
wheels=$3
here=$(cd "$(dirname "$0")" && pwd)

work=$(mktemp -d "$(dirname "$out")/jupyter.work.XXXXXX")
cleanup() {
    umount "$work/root/proc" 2>/dev/null || true
    umount "$work/root/tmp/wheels" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/root"
# the venv needs python3 and its libraries only: skip what is large and unused
tar --numeric-owner -xf "$rootfs" -C "$work/root" --exclude=./usr/share/doc \
    --exclude=./usr/share/man --exclude=./usr/share/locale --exclude=./usr/lib/python3/dist-packages
root=$work/root
mkdir -p "$root/tmp/wheels"
mount --bind -o ro "$wheels" "$root/tmp/wheels"
cp "$here/jupyter-requirements.txt" "$root/tmp/requirements.txt"
mount -t proc proc "$root/proc"
in_root() {
    chroot "$root" /usr/bin/env -i PATH=/opt/jupyter/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 "$@"
}
pip_wheel=$(cd "$wheels" && ls pip-*.whl | head -n 1)
echo "python3 -m venv /opt/jupyter; pip install (from $(ls "$wheels" | wc -l) wheels)"
in_root python3 -m venv --without-pip /opt/jupyter
in_root /opt/jupyter/bin/python "/tmp/wheels/$pip_wheel/pip" install -q --no-index \
    --no-cache-dir --disable-pip-version-check --find-links /tmp/wheels \
    -r /tmp/requirements.txt
in_root /opt/jupyter/bin/python -m ipykernel install --prefix /opt/jupyter --name python \
    --display-name Python
in_root /opt/jupyter/bin/python -m bash_kernel.install --sys-prefix
in_root /opt/jupyter/bin/python -c 'import matplotlib.pyplot'  # the font cache
in_root /opt/jupyter/bin/jupyter kernelspec list
umount "$root/proc"
umount "$root/tmp/wheels"
tar --numeric-owner -C "$root" -cf "$out.part" opt/jupyter root/.cache/matplotlib
mv "$out.part" "$out"
echo "jupyter layer written: $out ($(du -h "$out" | cut -f1))"
