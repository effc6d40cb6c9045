"""The code interpreter's Jupyter stack: wheels, the host virtual environment, the image.

- :func:`wheels` downloads `images/jupyter-requirements.txt` (and pip) from PyPI with pip, as
  CPython 3.11 manylinux wheels (bookworm's python3 and the host's Debian python3 both are
  3.11), into `.testbed/cache/jupyter-wheels-<hash>/`, once;
- :func:`host_venv` makes `.testbed/cache/jupyter-venv-<hash>/` from those wheels with a Python
  3.11 of the host (Debian's, as the recordings had): what the replay starts its Jupyter server
  from (`testbed.replay`);
- :func:`ensure_code_image` builds `opensandbox-agents/testbed-code-interpreter:bookworm`: the
  sandbox image plus `/opt/jupyter` (made in a chroot of the sandbox's root filesystem by
  `images/jupyter.sh`) and an entrypoint that starts the Jupyter server
  (`images/jupyter-entry.sh`), with `JUPYTER_HOST` and `JUPYTER_TOKEN` set; tagged
  `opensandbox/code-interpreter:v1.1.0` too when no other image has that tag.

Every step is cached by a hash of its inputs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from testbed import _images
from testbed._paths import CACHE_DIR, IMAGES_DIR, cache_lock
from testbed._proc import TestbedError, run, run_logged, say, step

REQUIREMENTS = IMAGES_DIR / "jupyter-requirements.txt"
CODE_TAG = "opensandbox-agents/testbed-code-interpreter:bookworm"
CODE_ALIAS = "opensandbox/code-interpreter:v1.1.0"
PORT = 44771
TOKEN = "opensandboxcodeinterpreterjupyter"  # upstream image's default
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


def _platforms() -> list[str]:
    if _images.arch() == "arm64":
        return [p.replace("x86_64", "aarch64") for p in PLATFORMS]
    return list(PLATFORMS)


def wheels_hash() -> str:
    return _images.digest("jupyter-wheels", _images.arch(), REQUIREMENTS.read_bytes())


def wheels() -> Path:
    """The downloaded wheels (cached)."""
    target = CACHE_DIR / f"jupyter-wheels-{wheels_hash()}"
    if (target / ".complete").is_file():
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    for old in CACHE_DIR.glob("jupyter-wheels-*"):
        shutil.rmtree(old, ignore_errors=True)
    part = target.with_name(target.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    args = [_pip_python(), "-m", "pip", "download", "-q", "-d", str(part)]
    args += ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp"]
    args += ["--abi", "cp311", "--disable-pip-version-check"]
    for platform in _platforms():
        args += ["--platform", platform]
    args += ["-r", str(REQUIREMENTS), "pip"]
    with step("pip download of the Jupyter stack (notebook, ipykernel, bash_kernel, ...)..."):
        run_logged(args, CACHE_DIR / "jupyter-wheels.log", what="pip download", timeout=1200)
    (part / ".complete").write_text("")
    part.rename(target)
    return target


def _pip_python() -> str:
    """An interpreter that has pip (a uv-made venv has none): this one, its base, python3."""
    base = getattr(sys, "_base_executable", "") or ""
    for candidate in (sys.executable, base, shutil.which("python3") or "", "/usr/bin/python3"):
        if candidate and run([candidate, "-m", "pip", "--version"], check=False).returncode == 0:
            return candidate
    raise TestbedError("no Python with pip found to download the Jupyter wheels")


def _python311() -> str:
    """A Python 3.11 of the host for the replay's Jupyter: Debian's when there is one."""
    for candidate in ("/usr/bin/python3.11", shutil.which("python3.11") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    if sys.version_info[:2] == (3, 11):
        return str(Path(getattr(sys, "_base_executable", "") or sys.executable).resolve())
    raise TestbedError("the replay's Jupyter server needs a Python 3.11 (none found)")


def host_venv() -> Path:
    """The host virtual environment with the Jupyter stack (cached; made under the cache lock,
    which a cached one does not wait for)."""
    target = _venv_path()
    if (target / ".complete").is_file():
        return target
    with cache_lock():
        target = _venv_path()  # another process may have made it meanwhile
        if (target / ".complete").is_file():
            return target
        return _make_venv(target)


def _venv_path() -> Path:
    key = _images.digest("jupyter-venv", wheels_hash(), _python311(), REQUIREMENTS.read_bytes())
    return CACHE_DIR / f"jupyter-venv-{key}"


def _make_venv(target: Path) -> Path:
    python = _python311()
    found = wheels()
    for old in CACHE_DIR.glob("jupyter-venv-*"):
        shutil.rmtree(old, ignore_errors=True)
    log = CACHE_DIR / "jupyter-venv.log"
    pip_wheel = next(found.glob("pip-*.whl"))
    vpy = str(target / "bin" / "python")
    with step(f"virtual environment for the replay's Jupyter server ({python})..."):
        run([python, "-m", "venv", "--without-pip", str(target)], timeout=120)
        run_logged(
            [
                *(vpy, str(pip_wheel / "pip"), "install", "-q", "--no-index", "--no-cache-dir"),
                *("--disable-pip-version-check", "--find-links", str(found)),
                *("-r", str(REQUIREMENTS)),
            ],
            log,
            what="pip install",
            timeout=1200,
        )
        install_kernelspecs(vpy, str(target))
    (target / ".complete").write_text("")
    return target


def install_kernelspecs(python: str, prefix: str) -> None:
    """`python` (as upstream's image: `ipykernel install --name python`) and `bash`
    (bash_kernel), both started as `python` from the server's PATH, as recorded."""
    run([python, "-m", "ipykernel", "install", "--prefix", prefix, "--name", "python"])
    run([python, "-m", "bash_kernel.install", "--prefix", prefix])
    for spec in Path(prefix, "share", "jupyter", "kernels").glob("*/kernel.json"):
        data = json.loads(spec.read_text())
        data["argv"][0] = "python"
        spec.write_text(json.dumps(data, indent=1))


def code_hash() -> str:
    return _images.digest(
        "code-interpreter",
        _images.LAYOUT,
        _images.sandbox_hash(),
        wheels_hash(),
        (IMAGES_DIR / "jupyter.sh").read_bytes(),
        (IMAGES_DIR / "jupyter-entry.sh").read_bytes(),
    )


def ensure_code_image() -> str:
    """Build (or reuse) the code-interpreter image; return the tag to create sandboxes with:
    `opensandbox/code-interpreter:v1.1.0` where that is ours (the core gives sandboxes of the
    code-interpreter tags their entrypoint, which starts the Jupyter server; for other tags it
    gives `tail -f /dev/null`), else CODE_TAG (then pass the entrypoint
    `/opt/code-interpreter/code-interpreter.sh` yourself)."""
    _images.ensure_sandbox_image()
    want = code_hash()
    if _images.is_current(CODE_TAG, want):
        say(f"code-interpreter image up to date: {CODE_TAG} ({want})")
    else:
        labels = _images.image_labels(CODE_TAG)
        if labels is not None and labels.get(_images.LABEL) != "1":
            raise TestbedError(f"{CODE_TAG} exists and was not built by the testbed")
        old = _images.image_id(CODE_TAG)
        found = wheels()
        layer = CACHE_DIR / f"jupyter-layer-{want}.tar"
        if not layer.is_file():
            for stale in CACHE_DIR.glob("jupyter-layer-*.tar"):
                stale.unlink()
            with step("the Jupyter layer: a venv in a chroot of the sandbox's root filesystem..."):
                run_logged(
                    [
                        "bash",
                        str(IMAGES_DIR / "jupyter.sh"),
                        str(layer),
                        str(_images.rootfs_tarball()),
                        str(found),
                    ],
                    CACHE_DIR / "jupyter-layer.log",
                    what="jupyter.sh",
                    timeout=1800,
                )
        entry = (IMAGES_DIR / "jupyter-entry.sh").read_bytes()
        with step(f"building {CODE_TAG} from {_images.SANDBOX_TAG} + /opt/jupyter..."):
            _images.layer_with_tar(
                _images.SANDBOX_TAG,
                CODE_TAG,
                layer,
                {"/opt/code-interpreter/code-interpreter.sh": (entry, 0o755)},
                [
                    "WORKDIR /root",
                    'CMD ["/bin/bash"]',
                    f"ENV JUPYTER_HOST=http://127.0.0.1:{PORT}",
                    f"ENV JUPYTER_TOKEN={TOKEN}",
                    *_images.label_changes("code-interpreter", want),
                ],
            )
        _images.retire(old, CODE_TAG)
        layer.unlink()  # 470 MB: the image holds it now
    return CODE_ALIAS if _images.alias(CODE_TAG, CODE_ALIAS) else CODE_TAG
