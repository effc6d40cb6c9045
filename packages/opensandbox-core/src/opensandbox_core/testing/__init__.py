"""An in-process fake OpenSandbox server and execd, for offline tests.

```python
from opensandbox_core import AsyncSandboxSession, SandboxSpec
from opensandbox_core.testing import FakeOpenSandbox

fake = FakeOpenSandbox()
async with AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
    assert (await sb.commands.run("printf 'hi'")).stdout == "hi"
assert fake.deleted == fake.created
```

`FakeOpenSandbox.transport` is an `httpx.MockTransport` that answers both the server's lifecycle
API (create, get, list, delete, renew, endpoints) and each sandbox's execd (ping, commands,
files), in memory. No shell runs: a command is answered by the `on_command` callback when one is
given (returning a `FakeOutcome`), else by a tiny table of canned behaviours (`printf`, `echo`,
`true`, `false`, `exit N`, `sleep N`, `cat FILE`, `mkdir`, `rm`, `realpath -z -m`, and the
library's own probe, GNU tools probe (it answers as an image with GNU tools) and atomic-rename
commands), else with exit code 127.

execd's two output framings are served: `framing="legacy"` (v1.0.17 to v1.0.19: one event per
line, line endings stripped, the command's raw `<tmp>/<id>.stdout|.stderr` files kept and served
by ranged `/files/download`) and `framing="modern"` (1.1: events keep their line endings).
Faults are armed per route with `fail_next`, `lose_next`, `hang_next` and `cut_stream_after`;
`kill_on_timeout=False` makes the daemon ignore commands' timeouts (only an interrupt stops them).
Every request is kept in `requests`. `FakeOpenSandbox(code=FakeCodeInterpreter())` serves
execd's code interpreter too (`/code`, its contexts and its bugs).
"""

from __future__ import annotations

from ._code import FakeCodeInterpreter
from ._model import FakeCommand, FakeOutcome
from ._server import FakeOpenSandbox

__all__ = ["FakeCodeInterpreter", "FakeCommand", "FakeOpenSandbox", "FakeOutcome"]
