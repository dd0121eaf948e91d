"""Run the async clients from synchronous code: one event loop on a daemon thread, shared by every synchronous
client in the process.

The synchronous ``Producer``/``Consumer``/``Admin`` are thin facades over the async core; this is the loop they
submit coroutines to. One shared loop rather than one per client, because gRPC's poller hands each call's
completion to the loop that made the call: a loop closed with a client while another client's loop still ran
received late completions and printed ``RuntimeError: Event loop is closed`` at close (and several loops all
woken by one poller socket print ``BlockingIOError``). The shared loop is never closed; it ends with the process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")

_lock = threading.Lock()
_shared: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None


def _forget_after_fork() -> None:
    """A forked child has the loop object but not its thread: start a new one on first use."""
    global _shared, _lock
    _shared, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def shared_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    global _shared
    with _lock:
        if _shared is None:
            loop = uvloop.new_event_loop()
            thread = threading.Thread(target=_run, args=(loop,), name="odradek-client", daemon=True)
            thread.start()
            _shared = loop, thread
        return _shared


def _run(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


class BackgroundLoop:
    """One client's handle on the shared loop."""

    def __init__(self, name: str = "odradek-client") -> None:
        self.name = name
        self.loop, self._thread = shared_loop()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (exceptions propagate to the caller)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                f"{self.name}: a synchronous client method was called from the client loop (e.g. from a delivery "
                "callback); it would wait on itself. Use the async client there."
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        """Release this handle. The shared loop keeps running for the process's other clients (see above)."""
