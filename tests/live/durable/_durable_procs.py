"""Worker processes for the durable tests: JSON event lines on stdout, logs in a file."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


class Worker:
    """A worker script run as a child process; `wait_for(event)` reads its stdout events."""

    def __init__(self, script: Path, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._log_file = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self._queue.put(json.loads(line))
        self._queue.put(None)

    def _describe(self) -> str:
        return f"events {self.events}; log tail:\n{self.log.read_text()[-3000:]}"

    def wait_for(self, event: str, timeout: float) -> dict[str, Any]:
        """The first event named `event` (reading on as needed); fails at the deadline or exit."""
        for seen in self.events:
            if seen["event"] == event:
                return seen
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no {event!r} from the worker within {timeout:g} s: " + self._describe()
                ) from None
            if item is None:
                self._queue.put(None)
                self.proc.wait(timeout=30)
                raise AssertionError(
                    f"the worker exited ({self.proc.returncode}) before {event!r}: "
                    + self._describe()
                )
            self.events.append(item)
            if item["event"] == event:
                return item

    def poll(self, event: str, timeout: float) -> dict[str, Any] | None:
        """Like `wait_for`, but None when the event has not come within `timeout`."""
        try:
            return self.wait_for(event, timeout)
        except AssertionError:
            if self.proc.poll() is not None:
                raise
            return None

    def named_now(self, event: str) -> list[dict[str, Any]]:
        """The events named `event` printed so far (reading whatever is waiting)."""
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is None:
                self._queue.put(None)
                break
            self.events.append(item)
        return self.named(event)

    def named(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]

    def finish(self, timeout: float) -> int:
        """Wait for the exit code, keeping every event the worker printed."""
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=30)
        while (item := self._queue.get_nowait() if not self._queue.empty() else None) is not None:
            self.events.append(item)
        return code

    def sigkill(self) -> float:
        """SIGKILL the worker (its whole process group); returns the time it was sent."""
        sent = time.time()
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        return sent

    def stop(self) -> None:
        """End the worker if it still runs (SIGTERM, then SIGKILL) and close its pipes."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log_file.close()

    def requests(self) -> list[tuple[float, str]]:
        """The HTTP requests the worker logged (httpx at INFO): (time, 'METHOD url')."""
        out = []
        for line in self.log.read_text().splitlines():
            stamp, _, rest = line.partition(" ")
            if " HTTP Request: " in rest:
                out.append((float(stamp), rest.split(" HTTP Request: ", 1)[1].rsplit(' "', 1)[0]))
        return out

    def logged_at(self, text: str) -> float:
        """The time of the first log line containing `text`."""
        for line in self.log.read_text().splitlines():
            if text in line:
                return float(line.partition(" ")[0])
        raise AssertionError(f"the worker never logged {text!r}: " + self._describe())
