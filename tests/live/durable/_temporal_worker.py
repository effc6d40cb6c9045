"""A Temporal worker process for `test_temporal_resume.py`.

argv: <temporal address> <task queue>. Serves `OsbDurableRun` until SIGTERM. Prints
`{"event": "ready"}` once polling; httpx logs every OpenSandbox request to stderr with its time.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from datetime import timedelta

STARTED = time.time()

from _temporal_flow import OsbDurableRun, destroy_workspace, emit  # noqa: E402
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402
from temporalio.worker.workflow_sandbox import (  # noqa: E402
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)

logging.basicConfig(
    stream=sys.stderr, level=logging.WARNING, format="%(created).6f %(name)s %(message)s"
)
for name in ("httpx", "pydantic_ai_opensandbox", "opensandbox_core"):
    logging.getLogger(name).setLevel(logging.INFO)


async def main(address: str, task_queue: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[OsbDurableRun],
        activities=[destroy_workspace],
        # The capability builds its (lazy, I/O-free) backend in workflow code; the core's session
        # holds a threading.Lock, which Temporal's workflow sandbox refuses unless these modules
        # are passed through. Nothing built there touches the network: every operation runs in
        # an activity. (The Pydantic AI README shows the same worker setting.)
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(
                "pydantic_ai_opensandbox", "opensandbox_core", "opensandbox"
            )
        ),
        # A dead worker's cached workflow moves to the others after this (default 10 s).
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=3),
    ):
        emit("ready", started=STARTED)
        await stop.wait()


asyncio.run(main(sys.argv[1], sys.argv[2]))
