"""Gather the interpreter that the execd stand-in brings into every sandbox.

Run inside the testbed's sandbox image (Debian bookworm) with its own python3:
`python3 execd-python.py > python.tar`. Writes to stdout a tar of this python3 binary, the
dynamic loader and every shared library it and its extension modules load, its standard library
(with the compiled `__pycache__` files, mtimes kept so they stay valid; tests, GUI, IDLE and
build files left out), and `execd-python`, a sh script that runs a Python program through that
loader: `execd-python /opt/opensandbox/execd ARGS...`. Nothing of it needs the image it runs
in (no python3, no libc). tests/testbed/_execd_python.py unpacks it on the host, and the
testbed's servers bind it read-only into every sandbox at /opt/opensandbox/python.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile

STDLIB = sysconfig.get_paths()["stdlib"]
VERSION = os.path.basename(STDLIB)  # python3.11
# Parts of the standard library that a daemon never loads: tests, GUIs, IDLE, build files.
SKIP_DIRS = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "__phello__"}
SKIP_DIR_PREFIXES = ("config-",)
SKIP_EXTENSIONS = re.compile(r"^(_tkinter|_test\w*|_ctypes_test|_xxtestfuzz|xxlimited\w*)\.")


def stdlib_files() -> list[str]:
    out = []
    for top, dirs, files in os.walk(STDLIB):
        rel = os.path.relpath(top, STDLIB)
        dirs[:] = sorted(
            d
            for d in dirs
            if not (rel == "." and (d in SKIP_DIRS or d.startswith(SKIP_DIR_PREFIXES)))
            and d not in ("site-packages", "dist-packages")
        )
        for name in sorted(files):
            if os.path.basename(top) == "lib-dynload" and SKIP_EXTENSIONS.match(name):
                continue
            out.append(os.path.join(top, name))
    return out


def needed_libraries(paths: list[str]) -> tuple[str, list[str]]:
    """(the dynamic loader, the shared libraries) that the ELF files `paths` load, per ldd."""
    loader, libs = "", set()
    for path in paths:
        proc = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            found = re.match(r"\s*(\S+) => (/\S+)", line)
            if found:
                libs.add(found.group(2))
            elif re.match(r"\s*/\S*/ld-linux\S*", line):
                loader = line.split()[0]
    return loader, sorted(libs)


def add(tar: tarfile.TarFile, name: str, path: str | None = None, data: bytes = b"") -> None:
    """One file (the real file behind a link), owned by root, mode and mtime kept."""
    info = tarfile.TarInfo(name)
    info.mode = 0o755
    if path is not None:
        with open(path, "rb") as fh:
            data = fh.read()
        st = os.stat(path)
        info.mtime, info.mode = int(st.st_mtime), st.st_mode & 0o777
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def main() -> None:
    binary = os.path.realpath(sys.executable)
    files = stdlib_files()
    loader, libs = needed_libraries([binary, *(f for f in files if f.endswith(".so"))])
    if not loader:
        sys.exit(f"execd-python: no dynamic loader found for {binary}")
    ld = os.path.basename(loader)
    run = (
        "#!/bin/sh\n"
        "# Runs a Python program with the interpreter beside this script, through its own\n"
        "# dynamic loader: nothing of the image is used. -I keeps PYTHON* variables away.\n"
        "here=${0%/*}\n"
        f'exec "$here/lib/{ld}" --library-path "$here/lib" "$here/bin/{VERSION}" -I "$@"\n'
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add(tar, "execd-python", data=run.encode())
        add(tar, f"bin/{VERSION}", binary)
        add(tar, f"lib/{ld}", os.path.realpath(loader))
        for path in libs:
            add(tar, f"lib/{os.path.basename(path)}", os.path.realpath(path))
        for path in files:
            add(tar, f"lib/{VERSION}/{os.path.relpath(path, STDLIB)}", path)
    sys.stdout.buffer.write(buf.getvalue())
    print(f"execd-python: {len(files)} files, {len(libs)} libraries, {ld}", file=sys.stderr)


if __name__ == "__main__":
    main()
