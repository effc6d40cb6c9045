"""One process of `test_langgraph_thread_resume.py`: a Deep Agents thread on a SQLite checkpointer.

argv: <sqlite path> <namespace> <image> <thread id> <mode>. Modes:
- `crash`: start the thread; when the model is asked for step 2 (after the file was written in the
  thread's sandbox and that step checkpointed), print `CRASH-POINT <time>` and wait to be killed.
- `resume`: continue the thread from its last checkpoint (`invoke(None, ...)`).
- `fresh`: run the whole script on the thread.
Prints JSON lines: `{"event": ...}`. httpx logs every request to stderr with its time.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
import threading
import time

STARTED = time.time()

from _durable_chat import HistoryScriptedModel  # noqa: E402
from deepagents import create_deep_agent  # noqa: E402
from langchain_core.messages import ToolMessage  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from deepagents_opensandbox_backend import ThreadSandboxBackend  # noqa: E402

db, namespace, image, thread_id, mode = sys.argv[1:6]


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


logging.basicConfig(
    stream=sys.stderr, level=logging.WARNING, format="%(created).6f %(name)s %(message)s"
)
logging.getLogger("httpx").setLevel(logging.INFO)
for name in ("deepagents_opensandbox_backend", "opensandbox_core"):
    logging.getLogger(name).setLevel(logging.INFO)


def before_step(n: int) -> None:
    emit("model", step=n)
    if mode == "crash" and n == 1:
        emit("crash-point")
        threading.Event().wait()  # the test kills this process now (SIGKILL)


STEPS = [
    ("write_file", {"file_path": "/workspace/notes.txt", "content": "written-before-the-crash\n"}),
    ("execute", {"command": "cat /workspace/notes.txt && date +%s.%N"}),
    "The note is still there.",
]

backend = ThreadSandboxBackend(namespace=namespace, image=image)
connection = sqlite3.connect(db, check_same_thread=False)
agent = create_deep_agent(
    model=HistoryScriptedModel(steps=STEPS, before_step=before_step),
    system_prompt="You keep notes in the sandbox.",
    backend=backend,
    checkpointer=SqliteSaver(connection),
)
config = {"configurable": {"thread_id": thread_id}}
emit("ready", started=STARTED)
try:
    request = None if mode == "resume" else {"messages": "Leave a note and read it back."}
    result = agent.invoke(request, config, durability="sync")
    tools = {m.name: str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)}
    emit(
        "finished",
        sandbox=backend.for_thread(thread_id).id,
        tools=tools,
        final=str(result["messages"][-1].content),
    )
finally:
    backend.close()
    connection.close()
