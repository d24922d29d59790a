"""A plugin's `requirements.txt`, installed before the runtime loads the plugin, into the
plugin's own environment — never into LangHost's interpreter, never `langbot-plugin` itself.

- **Read by the SDK's own rule** (`PluginDependencyEnvironmentStore._read_requirements`, what
  the SDK's runtime applies before it installs): `langbot-plugin` is the runtime's, so a pin
  of it is checked against the running SDK and dropped, and a pin the SDK does not satisfy
  refuses the plugin with a reason naming it; pip options and direct URLs are refused too.
- **Installed where the SDK looks**: `<plugin folder>/.venv/lib/pythonX.Y/site-packages`
  (`pkgmgr.get_plugin_site_packages`), which the runtime puts on the plugin process's path
  after LangHost's own packages, which no plugin can change. Inside its sandbox the plugin
  folder is the plugin's own; removing the folder removes its environment.
- **pip runs confined** where the plugin sandbox works (a package's setup script is the
  plugin's code): LangHost's data dir hidden, only the environment writable, and with the
  runtime's allow-listed environment (no secret of the host).
- Each file is installed once per SDK: a marker named by their hash records it (and the
  environment must still be there).

LangHost installs them itself (the runtime is spawned with `--skip-deps-check`) so that a
failure is shown on the plugin's installation.
"""

import asyncio
import contextlib
import hashlib
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

from runners.runtime.process import runtime_environment
from runners.runtime.sandbox import Sandbox

# The SDK's `pkgmgr.PLUGIN_VENV_DIR`: its installer modules (they load pip and more) are
# imported when a plugin has requirements, not at start.
PLUGIN_VENV_DIR = ".venv"
PIP_TIMEOUT_SECONDS = 300.0
ERROR_TAIL_CHARS = 2000
SDK_VERSION = version("langbot-plugin")


class RequirementsRefused(Exception):
    """The plugin's requirements cannot be installed here (a pin of another SDK, a pip
    option); the message says which."""


def site_packages(folder: Path) -> Path:
    """Where the plugin's own packages go (the SDK's `get_plugin_site_packages`)."""
    return (folder / PLUGIN_VENV_DIR / "lib" / f"python{sys.version_info.major}."
            f"{sys.version_info.minor}" / "site-packages")


def plugin_requirements(folder: Path) -> tuple[str, ...]:
    """The requirement lines pip installs for the plugin, as the SDK's runtime reads them."""
    from langbot_plugin.runtime.plugin.dependency_environment import (  # on use, see above
        DependencyEnvironmentPreparationError,
        PluginDependencyEnvironmentStore,
    )

    try:
        lines, _ = PluginDependencyEnvironmentStore._read_requirements(
            SimpleNamespace(code_path=folder))
    except DependencyEnvironmentPreparationError as exc:
        raise RequirementsRefused(str(exc)) from exc
    return lines


def _digest(requirements: Path) -> str:
    return hashlib.sha256(f"{sys.executable}\0{SDK_VERSION}\0".encode()
                          + requirements.read_bytes()).hexdigest()


async def _pip_install(lines: tuple[str, ...], folder: Path, timeout: float,
                       sandbox: Sandbox | None) -> tuple[int, str]:
    """pip's exit code and output (both streams); 124 and a note when it ran out of time."""
    from langbot_plugin.runtime.helper.pkgmgr import get_pip_index_args  # on use, see above

    target = site_packages(folder)
    shutil.rmtree(target, ignore_errors=True)  # what an earlier version of the file installed
    target.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(prefix=".pip-", dir=folder / PLUGIN_VENV_DIR))
    (scratch / "requirements.txt").write_text("\n".join(lines) + "\n")
    confined = (sandbox.command_argv([str(folder / PLUGIN_VENV_DIR)], str(folder)) if sandbox
                else [])
    process = await asyncio.create_subprocess_exec(
        *confined, sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
        "--no-input", "--no-cache-dir", "--no-compile", "--ignore-installed",
        "--target", str(target), *get_pip_index_args(), "-r", str(scratch / "requirements.txt"),
        cwd=folder, env={**runtime_environment(str(folder)), "TMPDIR": str(scratch)},
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
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return process.returncode, output.decode(errors="replace")


async def install_requirements(folder: Path, marker_dir: Path, sandbox: Sandbox | None = None,
                               timeout: float = PIP_TIMEOUT_SECONDS) -> str | None:
    """Install the folder's `requirements.txt` unless already done: None, or why not (the
    SDK's refusal, or pip's error tail)."""
    requirements = folder / "requirements.txt"
    if not requirements.is_file():
        return None
    marker = marker_dir / _digest(requirements)
    if marker.exists() and site_packages(folder).is_dir():
        return None
    try:
        lines = await asyncio.to_thread(plugin_requirements, folder)
    except RequirementsRefused as exc:
        return str(exc)
    if lines:
        code, output = await _pip_install(lines, folder, timeout, sandbox)
        if code != 0:
            return output.strip()[-ERROR_TAIL_CHARS:]
    else:
        site_packages(folder).mkdir(parents=True, exist_ok=True)
    marker_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{folder.name}\n")
    return None
