"""A Prefect worker process for `test_prefect_resume.py`: a runner serving one deployment.

argv: <deployment name>. Serves `osb-prefect-run` from `_prefect_flow.py` until SIGTERM; each
flow run it claims runs in a child process of its own (`python -m prefect.engine`, in this
process group, its output streamed to this one's). Prints `{"event": "ready"}` once the
deployment is registered. The Prefect API, storage and home come from the PREFECT_* environment
the test sets; httpx logs every request to stderr with its time.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

STARTED = time.time()

from _prefect_flow import emit, osb_prefect_run  # noqa: E402
from prefect.runner import Runner  # noqa: E402


async def main(deployment: str) -> None:
    # Polls the API every second for scheduled runs of its deployments (10 s by default).
    runner = Runner(name=f"osb-worker-{os.getpid()}", query_seconds=1, pause_on_shutdown=False)
    # Registered as a deployment with an entrypoint, not `add_flow`: with an in-memory flow the
    # runner cloudpickles it into the flow-run process, and the agent does not pickle
    # ("cannot pickle 'weakref.ReferenceType' object", prefect 3.9.1). From the entrypoint the
    # flow-run process imports the flow's module itself, as it would on any other machine.
    served = await osb_prefect_run.ato_deployment(name=deployment)
    served.work_pool_name = None  # run here, by this runner, not by a work pool's worker
    served.work_queue_name = None
    await runner.aadd_deployment(served)
    emit("ready", started=STARTED)
    await runner.start()


asyncio.run(main(sys.argv[1]))
