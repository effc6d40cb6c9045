"""The execd stand-in (the package `tests/testbed/execd/daemon`) as one file: a zip application.

The execd image carries it as `/execd`, the replay and the daemon's unit tests run it. Names are
sorted, timestamps and modes fixed, nothing compressed: the same sources give the same bytes.
Beside each module goes its compiled form (an unchecked hash-based `.pyc` of this Python's
bytecode version; another version falls back to the `.py`), so that the daemon listens as soon
as the single-file daemon did (a zip application is otherwise compiled at every start, ~0.4 s
more here). `python -m testbed._daemon build OUT` (PYTHONPATH=tests) writes it; `python3 OUT
--port N` runs it.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import marshal
import sys
import zipfile
from pathlib import Path

from testbed._paths import EXECD_DIR

__all__ = ["PACKAGE", "build", "package_dir", "source_key", "zipapp_bytes"]

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


def _pyc(source: bytes, name: str) -> bytes:
    """An unchecked hash-based .pyc of `source` (what py_compile writes for UNCHECKED_HASH)."""
    code = compile(source, name, "exec", dont_inherit=True)
    flags = (1).to_bytes(4, "little")  # hash-based, source not checked
    return (
        importlib.util.MAGIC_NUMBER
        + flags
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def zipapp_bytes(package: Path | None = None, *, compiled: bool = True) -> bytes:
    """The zip application of `package` (default: the stand-in's): its `.py` files under
    `daemon/` (with their `.pyc` unless `compiled=False`), and a `__main__.py` that runs
    `daemon.server.main`."""
    package = package or package_dir()
    sources = sorted(p for p in package.glob("*.py") if p.is_file())
    if not any(p.name == "server.py" for p in sources):
        raise FileNotFoundError(f"{package} holds no daemon package (no server.py)")
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w") as archive:
        _entry("__main__.py", _MAIN, archive)
        for path in sources:
            name, source = f"{PACKAGE}/{path.name}", path.read_bytes()
            _entry(name, source, archive)
            if compiled:
                _entry(name + "c", _pyc(source, name), archive)
    return buf.getvalue()


def source_key(package: Path | None = None) -> bytes:
    """What the compiled zip application follows from: its sources, and the bytecode version
    of this Python (the image's input hash takes this, not the .pyc bytes themselves)."""
    return zipapp_bytes(package, compiled=False) + importlib.util.MAGIC_NUMBER


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
