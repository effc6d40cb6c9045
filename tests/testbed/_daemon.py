"""The execd stand-in (the package `tests/testbed/execd/daemon`) as one file: a zip application.

The execd image carries it as `/execd`, the replay and the daemon's unit tests run it. The same
sources always give the same bytes (names sorted, fixed timestamps and modes, stored without
compression), so the image's input hash is the hash of those bytes. `python -m testbed._daemon
build OUT` (PYTHONPATH=tests) writes it; `python3 OUT --port N` runs it.
"""

from __future__ import annotations

import argparse
import io
import sys
import zipfile
from pathlib import Path

from testbed._paths import EXECD_DIR

__all__ = ["PACKAGE", "build", "package_dir", "zipapp_bytes"]

PACKAGE = "daemon"
SHEBANG = b"#!/usr/bin/env python3\n"
_MAIN = b'''"""The execd stand-in: see daemon/README.md."""

import sys

from daemon.server import main

sys.exit(main(sys.argv[1:]))
'''
_EPOCH = (1980, 1, 1, 0, 0, 0)


def package_dir(execd_dir: Path = EXECD_DIR) -> Path:
    return execd_dir / PACKAGE


def _entry(name: str, data: bytes, archive: zipfile.ZipFile) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = 0o644 << 16
    info.create_system = 3
    archive.writestr(info, data, compress_type=zipfile.ZIP_STORED)


def zipapp_bytes(package: Path | None = None) -> bytes:
    """The zip application of `package` (default: the stand-in's): its `.py` files under
    `daemon/`, and a `__main__.py` that runs `daemon.server.main`."""
    package = package or package_dir()
    sources = sorted(p for p in package.glob("*.py") if p.is_file())
    if not any(p.name == "server.py" for p in sources):
        raise FileNotFoundError(f"{package} holds no daemon package (no server.py)")
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w") as archive:
        _entry("__main__.py", _MAIN, archive)
        for path in sources:
            _entry(f"{PACKAGE}/{path.name}", path.read_bytes(), archive)
    return buf.getvalue()


def build(dest: Path, package: Path | None = None) -> Path:
    """Write the zip application to `dest` (mode 0755) and return `dest`."""
    dest.write_bytes(zipapp_bytes(package))
    dest.chmod(0o755)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed._daemon", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the zip application")
    b.add_argument("dest", type=Path)
    b.add_argument("--package", type=Path, default=None, help="default: " + str(package_dir()))
    args = ap.parse_args(argv)
    out = build(args.dest, args.package)
    print(f"{out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
