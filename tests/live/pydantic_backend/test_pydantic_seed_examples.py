"""Every example of the README, run for real on the testbed with a scripted model.

The testbed tags its sandbox image as `python:3.13-slim`, so the examples keep their image name. A
model is scripted per run (`_scripted.script`), and `Coder()`/`Shell()` give it the same tools a real
model would call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from _harness import MISSING

pytest.importorskip("pydantic_ai_harness", reason=MISSING)
from _scripted import script
from pydantic_ai import Agent
from pydantic_ai.workspaces import Workspace, WorkspaceRef, WorkspaceUnavailableError
from pydantic_ai_harness.coder import Coder
from pydantic_ai_harness.shell import Shell

from opensandbox_core.fleet import list_sandboxes
from pydantic_ai_opensandbox import CREATE_METADATA_KEY, OpenSandbox, OpenSandboxBackend

IMAGE = "python:3.13-slim"
PRIMES = (
    "primes, n = [], 2\n"
    "while len(primes) < 10:\n"
    "    if all(n % p for p in primes):\n"
    "        primes.append(n)\n"
    "    n += 1\n"
    "print(*primes)\n"
)


def coder_agent() -> Agent[None, str]:
    return Agent(capabilities=[OpenSandbox(image=IMAGE), Coder()])


def write_and_run_primes() -> object:
    return script(
        ("write_file", {"path": "primes.py", "content": PRIMES}),
        ("shell", {"command": "python3 primes.py"}),
        "The script prints the first 10 primes.",
    )


async def test_quick_start_creates_on_first_use(
    created_refs: list[WorkspaceRef], caplog: pytest.LogCaptureFixture
) -> None:
    agent = coder_agent()
    model = write_and_run_primes()
    with caplog.at_level(logging.INFO, logger="pydantic_ai_opensandbox._backend"):
        result = await agent.run(
            "Write a script that prints the first 10 primes, and run it.",
            model=model.model,  # type: ignore[attr-defined]
        )
    ref = result.workspace.ref
    assert ref is not None
    created_refs.append(ref)
    assert ref.provider == "opensandbox"
    assert any("2 3 5 7 11 13 17 19 23 29" in r for r in model.tool_returns)  # type: ignore[attr-defined]
    # The create is logged once, with the sandbox id, on the backend module's logger.
    created = [
        r.getMessage()
        for r in caplog.records
        if r.name == "pydantic_ai_opensandbox._backend"
        and r.getMessage() == f"Created OpenSandbox sandbox {ref.id}"
    ]
    assert len(created) == 1
    # The sandbox carries the capability's metadata entry, so an orphan can be found.
    tagged = await list_sandboxes(metadata={CREATE_METADATA_KEY: "true"})
    assert ref.id in {s.id for s in tagged}
    # The run started in /workspace and the sandbox keeps running after it.
    again = OpenSandbox().backend(ref)
    try:
        assert (await Workspace(again).read_text("/workspace/primes.py")) == PRIMES
    finally:
        await again.aclose()


async def test_follow_up_run_continues_in_the_same_sandbox(
    created_refs: list[WorkspaceRef],
) -> None:
    agent = coder_agent()
    result = await agent.run(
        "Write a script that prints the first 10 primes, and run it.",
        model=write_and_run_primes().model,  # type: ignore[attr-defined]
    )
    assert result.workspace.ref is not None
    created_refs.append(result.workspace.ref)
    follow = script(
        ("shell", {"command": "sed -i 's/< 10/< 100/' primes.py && python3 primes.py | wc -w"}),
        "Now it prints 100.",
    )
    followup = await agent.run(
        "Now make it print the first 100.",
        message_history=result.all_messages(),
        model=follow.model,
    )
    assert followup.workspace.ref == result.workspace.ref
    assert any(
        r.strip().startswith("100") or "\n100" in r or "100" in r for r in follow.tool_returns
    )


async def test_reattach_later_by_ref_and_new(created_refs: list[WorkspaceRef]) -> None:
    agent = coder_agent()
    result = await agent.run(
        "Write a script that prints the first 10 primes, and run it.",
        model=write_and_run_primes().model,  # type: ignore[attr-defined]
    )
    ref = result.workspace.ref  # store this, e.g. in your database
    assert ref is not None
    created_refs.append(ref)
    later_script = script(("shell", {"command": "cat primes.py"}), "It is there.")
    later = await agent.run(
        "Now make it print the first 100.", workspace=ref, model=later_script.model
    )
    assert later.workspace.ref == ref
    assert any("primes.append" in r for r in later_script.tool_returns)
    # `workspace='new'` creates a fresh sandbox even when the history names one.
    fresh_script = script(("shell", {"command": "ls primes.py"}), "Not there.")
    fresh = await agent.run(
        "Start over.",
        message_history=result.all_messages(),
        workspace="new",
        model=fresh_script.model,
    )
    assert fresh.workspace.ref is not None
    created_refs.append(fresh.workspace.ref)
    assert fresh.workspace.ref != ref
    assert any("No such file" in r for r in fresh_script.tool_returns)


async def test_prepare_a_sandbox_before_the_run() -> None:
    agent = Agent(capabilities=[OpenSandbox(image=IMAGE), Coder()])
    fix = script(
        ("edit_file", {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
        ("shell", {"command": "python3 -c 'import calc; print(calc.add(2, 3))'"}),
        "Fixed.",
    )
    backend = OpenSandboxBackend(image=IMAGE)
    try:
        workspace = Workspace(backend)
        await workspace.write_text("calc.py", "def add(a, b):\n    return a - b\n")
        # The README installs pytest with pip; the testbed has no network, so the setup step here
        # is a command that needs none. Its .pyc files are checked by source hash: the native edit
        # below can land in the same second as this step and keep the file's size, which a
        # timestamp-checked .pyc would not notice (Python would then run the old code).
        install = await workspace.run(
            ["python3", "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", "."],
            timeout=300,
        )
        if install.exit_code != 0:
            raise RuntimeError(f"setup failed: {install.stderr}")
        result = await agent.run("Fix the bug in calc.py.", workspace=backend, model=fix.model)
        assert result.output == "Fixed."
        assert result.workspace.ref == backend.ref
        assert any(r.strip() == "5" or "5" in r for r in fix.tool_returns[1:])
        assert "a + b" in await workspace.read_text("calc.py")
    finally:
        await backend.aclose()
        if backend.ref is not None:
            await OpenSandbox().destroy(backend.ref)


async def test_clean_up_then_a_run_raises_unavailable() -> None:
    agent = Agent(capabilities=[OpenSandbox(image=IMAGE), Shell()])
    shell = script(("run_command", {"command": "echo hello > note.txt && cat note.txt"}), "ok")
    result = await agent.run("Leave a note.", model=shell.model)
    ref = result.workspace.ref
    assert ref is not None
    assert any("hello" in r for r in shell.tool_returns)

    async def remove_sandbox(ref: WorkspaceRef) -> None:
        await OpenSandbox().destroy(ref)

    await remove_sandbox(ref)
    await remove_sandbox(ref)  # already gone: quiet
    with pytest.raises(WorkspaceUnavailableError):
        await agent.run(
            "Read the note.",
            message_history=result.all_messages(),
            model=script(("run_command", {"command": "cat note.txt"}), "ok").model,
        )
    with pytest.raises(WorkspaceUnavailableError):
        await agent.run(
            "Read the note.",
            workspace=ref,
            model=script(("run_command", {"command": "cat note.txt"}), "ok").model,
        )


async def test_without_an_image_only_refs_are_served(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    backend = make_backend()
    await Workspace(backend).write_text("kept.txt", "kept")
    await backend.aclose()
    assert backend.ref is not None
    agent = Agent(capabilities=[OpenSandbox(), Shell()])
    s = script(("run_command", {"command": "cat kept.txt"}), "ok")
    result = await agent.run("Read it.", workspace=backend.ref, model=s.model)
    assert result.workspace.ref == backend.ref
    assert any("kept" in r for r in s.tool_returns)
