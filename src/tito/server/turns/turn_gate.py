"""The gate every turn passes: refused or held while turns are paused for a weight update, counted in flight.

While paused (server.turns.drain's admin routes), a new turn is either refused with 429 and `Retry-After` (the openai
and anthropic SDKs retry it after that time) or held until resume; the pause chooses. A turn is counted from the
moment it passes the gate until its reply (whole or streamed) has been sent. `TurnGate.turn()` is the one gate:
server.turns.drain's `TurnGateMiddleware` enters it around every turn route of every dialect, so the turn path itself
knows nothing of it.

Imports from tito: server.errors, server.metrics.
"""

from __future__ import annotations

import asyncio
import enum
import time
from typing import Any

from tito.server.errors import PausedError
from tito.server.metrics import ServerMetrics


class PauseMode(enum.Enum):
    REJECT = "reject"
    """A new turn gets 429 with Retry-After."""
    HOLD = "hold"
    """A new turn waits until resume (its client sees a slow reply)."""


class TurnGate:
    """Whether new turns may start, and how many are in flight (see the module docstring)."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics
        self.mode: PauseMode | None = None
        """None: not paused."""
        self.retry_after = 1.0
        self.in_flight = 0
        self.held = 0
        self._paused_at = 0.0
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._idle = asyncio.Event()
        self._idle.set()

    def turn(self) -> _GatedTurn:
        """Pass a turn through the gate (`async with gate.turn():`): refused (PausedError) or held while paused,
        then counted in flight until the block ends."""
        return _GatedTurn(self)

    async def _enter(self) -> None:
        while self.mode is not None:
            if self.mode is PauseMode.REJECT:
                raise PausedError(
                    "turns are paused for a weight update; retry after Retry-After", retry_after_s=self.retry_after
                )
            self.held += 1
            self.metrics.turns_held.inc()
            try:
                await self._resumed.wait()
            finally:
                self.held -= 1
        self.in_flight += 1
        self._idle.clear()

    def _exit(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    def pause(self, mode: PauseMode, retry_after: float) -> None:
        """Stop new turns from starting (a second pause changes the mode, and keeps the first's start)."""
        if self.mode is None:
            self._paused_at = time.monotonic()
            self._resumed.clear()
        self.mode, self.retry_after = mode, retry_after

    async def drain(self, timeout: float) -> tuple[bool, float]:
        """Wait until no turn is in flight or `timeout` passes: (drained, seconds waited)."""
        started = time.monotonic()
        try:
            if not self._idle.is_set():  # wait_for with timeout 0 times out even on a set event
                await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False, time.monotonic() - started
        waited = time.monotonic() - started
        self.metrics.drain_seconds.observe(waited)
        return True, waited

    def resume(self) -> float:
        """Let turns start again (held ones first); returns how long turns were paused (0 when they were not)."""
        if self.mode is None:
            return 0.0
        paused = time.monotonic() - self._paused_at
        self.metrics.paused_seconds.inc(paused)
        self.mode = None
        self._resumed.set()
        return paused

    def status(self) -> dict[str, Any]:
        return {
            "paused": self.mode is not None,
            "mode": self.mode.value if self.mode is not None else None,
            "in_flight": self.in_flight,
            "held": self.held,
            "paused_seconds": time.monotonic() - self._paused_at if self.mode is not None else 0.0,
        }


class _GatedTurn:
    """One turn's pass through a TurnGate, as a plain async context manager: every turn enters one, and a generator
    based one (`contextlib.asynccontextmanager`) costs twice the instructions."""

    __slots__ = ("_gate",)

    def __init__(self, gate: TurnGate) -> None:
        self._gate = gate

    async def __aenter__(self) -> None:
        await self._gate._enter()

    async def __aexit__(self, *_exc: object) -> None:
        self._gate._exit()
