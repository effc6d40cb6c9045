"""The README's usage examples, run as written against a live sandbox."""

from __future__ import annotations

import csv
import io
import struct
import warnings
import zlib
from pathlib import Path

import pytest

from deepagents_opensandbox_backend import InsecureSandboxWarning, OpenSandboxBackend
from opensandbox_core import ConfigurationError

MAKE_PNG = r"""
import collections, csv, struct, zlib

with open("/workspace/customers-1000.csv", newline="") as f:
    counts = collections.Counter(row["Country"] for row in csv.DictReader(f))
countries = sorted(counts)
width, height = 8 * len(countries), max(counts.values())
rows = []
for y in range(height):
    row = bytearray(b"\x00")
    for x in range(width):
        filled = height - y <= counts[countries[x // 8]]
        row += bytes((30, 120, 200) if filled else (255, 255, 255))
    rows.append(bytes(row))

def chunk(tag, data):
    return (struct.pack(">I", len(data)) + tag + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

png = (b"\x89PNG\r\n\x1a\n"
       + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
       + chunk(b"IEND", b""))
with open("/workspace/customers_by_country.png", "wb") as f:
    f.write(png)
print(len(countries), width, height)
"""


def _customers_csv() -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["Index", "Customer Id", "First Name", "Country"])
    countries = ["Chile", "Japan", "Kenya", "Norway", "Peru"]
    for i in range(1000):
        writer.writerow([i + 1, f"C{i:05d}", f'Name, "{i}"', countries[min(i // 150, 4)]])
    return out.getvalue().encode()


def _decode_png(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, width, height, idat = 8, 0, 0, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        tag, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF, tag
        if tag == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif tag == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_upload_csv_and_download_a_png_made_in_the_sandbox(
    backend: OpenSandboxBackend, tmp_path: Path
) -> None:
    local_csv = tmp_path / "customers-1000.csv"
    local_csv.write_bytes(_customers_csv())

    # -- as in the README --
    csv_bytes = Path(local_csv).read_bytes()
    results = backend.upload_files([("/workspace/customers-1000.csv", csv_bytes)])
    for r in results:
        if r.error:
            raise RuntimeError(f"Upload failed for {r.path}: {r.error}")

    assert backend.write("/workspace/make_png.py", MAKE_PNG).error is None
    run = backend.execute("python3 /workspace/make_png.py")
    assert (run.exit_code, run.output) == (0, "5 40 400\n")

    downloads = backend.download_files(["/workspace/customers_by_country.png"])
    for d in downloads:
        if d.error:
            print(f"Could not download {d.path}: {d.error}")
        else:
            assert d.content is not None
            (tmp_path / "customers_by_country.png").write_bytes(d.content)
    # -- end --

    png = (tmp_path / "customers_by_country.png").read_bytes()
    width, height, pixels = _decode_png(png)
    assert (width, height) == (40, 400)
    assert len(pixels) == height * (1 + 3 * width)
    assert pixels[1:4] == b"\xff\xff\xff"  # top row, Chile (150 customers): background
    assert pixels[97:100] == b"\x1e\x78\xc8"  # top row, Peru (400 customers): its bar
    assert backend.download_files(["/workspace/customers-1000.csv"])[0].content == csv_bytes


def test_running_a_command_directly(backend: OpenSandboxBackend) -> None:
    backend.upload_files([("/workspace/seen.txt", b"x")])
    result = backend.execute("ls -la /workspace")
    print(result.output, result.exit_code)
    assert result.exit_code == 0
    assert "seen.txt" in result.output
    assert backend.execute("ls /nope").exit_code == 2


def test_no_warning_when_the_key_is_in_the_environment(testbed_env: dict[str, str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureSandboxWarning)
        backend = OpenSandboxBackend.create()
    try:
        assert backend.execute("echo ok").output == "ok\n"
    finally:
        backend.kill()


def test_no_warning_when_the_key_is_an_argument(
    testbed_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY")
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureSandboxWarning)
        backend = OpenSandboxBackend.create(api_key=testbed_env["OPEN_SANDBOX_API_KEY"])
    backend.kill()


def test_without_a_key_it_warns_and_the_secured_server_refuses(
    testbed_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY")
    with pytest.warns(InsecureSandboxWarning), pytest.raises(ConfigurationError, match="API key"):
        OpenSandboxBackend.create()
