"""A plugin's `requirements.txt`, pip-installed before the runtime loads the plugin.

The runtime runs every plugin process on its own interpreter, and LangHost spawns it on this
one (`sys.executable`), so that is where they go. LangHost installs them itself (the runtime
is spawned with `--skip-deps-check`) so that a failure is shown on the plugin's installation.
Each file is installed once: a marker named by its hash (and the interpreter's) records it.
"""

import asyncio
import contextlib
import hashlib
import sys
from pathlib import Path

PIP_TIMEOUT_SECONDS = 300.0
ERROR_TAIL_CHARS = 2000


def _digest(requirements: Path) -> str:
    return hashlib.sha256(sys.executable.encode() + b"\0" + requirements.read_bytes()).hexdigest()


async def _pip_install(requirements: Path, timeout: float) -> tuple[int, str]:
    """pip's exit code and output (both streams); 124 and a note when it ran out of time."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
        "-r", requirements.name,
        cwd=requirements.parent,  # the file's own relative paths (-r, -e ./x) resolve as written
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(timeout):
            output, _ = await process.communicate()
    except BaseException as exc:  # timed out or cancelled: pip must not run on unseen
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.communicate()  # reaped and its pipe read to the end: nothing left open
        if isinstance(exc, TimeoutError):
            return 124, f"pip install did not finish within {timeout:.0f}s"
        raise
    return process.returncode, output.decode(errors="replace")


async def install_requirements(folder: Path, marker_dir: Path,
                               timeout: float = PIP_TIMEOUT_SECONDS) -> str | None:
    """Install the folder's `requirements.txt` unless already done: None, or pip's error tail."""
    requirements = folder / "requirements.txt"
    if not requirements.is_file():
        return None
    marker = marker_dir / _digest(requirements)
    if marker.exists():
        return None
    code, output = await _pip_install(requirements, timeout)
    if code != 0:
        return output.strip()[-ERROR_TAIL_CHARS:]
    marker_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{folder.name}\n")
    return None
