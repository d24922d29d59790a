"""A tiny host for the SIGKILL test: start a link, print the runtime's process group, idle."""

from __future__ import annotations

import asyncio
import json
import sys

from memory_host import MemoryHost
from runtime_helpers import group_pids, wait_for_runner

from runners.runtime import RuntimeLink
from tests.timing import scaled


async def main(runtime_dir: str) -> None:
    link = RuntimeLink(MemoryHost(), "sigkill", runtime_dir=runtime_dir)
    await link.start()
    await link.wait_ready(scaled(20))
    await wait_for_runner(link, "plugin:e2e/agent-runner-qa/default")
    print(json.dumps({"runtime": link.pid, "group": group_pids(link.process_group)}),
          flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
