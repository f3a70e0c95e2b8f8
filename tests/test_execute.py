"""scripts/execute.py: waiting for a reply polls in short steps and keeps the caller's deadline."""

import asyncio
import time
from queue import Empty

import pytest
from repo_files import load_module

execute = load_module("scripts/execute.py")


class Channel:
    """A shell channel whose reply is found only by the poll that comes after `ready_at`."""

    def __init__(self, ready_at: float):
        self.ready_at, self.timeouts = ready_at, []

    async def get_msg(self, timeout=None):
        self.timeouts.append(timeout)
        if time.monotonic() >= self.ready_at:
            return {"reply": True}
        await asyncio.sleep(timeout)  # a missed wake-up: the poll runs out
        raise Empty


def test_a_reply_that_arrives_during_a_long_wait_is_found(monkeypatch):
    monkeypatch.setattr(execute, "POLL_SECONDS", 0.01)
    channel = Channel(ready_at=time.monotonic() + 0.05)
    execute.poll_in_steps(channel)
    assert asyncio.run(channel.get_msg(timeout=60)) == {"reply": True}
    assert len(channel.timeouts) > 1 and max(channel.timeouts) <= 0.01


def test_the_deadline_still_holds(monkeypatch):
    monkeypatch.setattr(execute, "POLL_SECONDS", 0.01)
    channel = Channel(ready_at=float("inf"))
    execute.poll_in_steps(channel)
    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.05))
    assert 0.04 <= time.monotonic() - start < 1
