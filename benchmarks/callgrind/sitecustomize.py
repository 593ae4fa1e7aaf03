"""Instruction counts of `tito serve` under a benchmark: each server runs under valgrind's callgrind, counting from
its 6th turn request on, so what is counted is the measured turns (and the shutdown), not the start.

CPU time on a shared or virtual machine swings by 2x from one minute to the next (benchmarks/RESULTS.md); the number
of instructions a turn executes does not, so two trees driven alike compare to within a fraction of a percent.
Python imports this file at start-up when its folder is on PYTHONPATH; it acts only in a `tito serve` process and
only with TITO_CALLGRIND set (a path prefix: callgrind writes PREFIX.<pid>, whose `summary:` line is the count):

  TITO_CALLGRIND=/tmp/cg/run PYTHONPATH=benchmarks/callgrind:src python benchmarks/turn_cpu.py --old REV ...
  grep -H '^summary:' /tmp/cg/run.*   (pids in start order: per dialect, each tree whole, then each streamed)

Needs valgrind (apt-get install valgrind); a turn under it takes ~50x longer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

_TURN_PATHS = ("/v1/messages", "/v1/responses", "/v1/chat/completions")
_COUNT_FROM = 6
"""The turn request from which instructions are counted (the first ones warm caches and grow the history)."""


def _count_from_the_sixth_turn() -> None:
    """Once the server's turn lane is imported, wrap it to switch callgrind's counting on at the 6th turn."""
    while (lane := sys.modules.get("tito.server.turn_lane")) is None or not hasattr(lane, "TurnLane"):
        time.sleep(0.05)
    original = lane.TurnLane.__call__
    turns = 0

    async def counted(self: Any, scope: Any, receive: Any, send: Any) -> None:
        nonlocal turns
        if scope.get("method") == "POST" and scope.get("path", "").endswith(_TURN_PATHS):
            turns += 1
            if turns == _COUNT_FROM:
                subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=False)
        await original(self, scope, receive, send)

    lane.TurnLane.__call__ = counted


if os.environ.get("TITO_CALLGRIND") and "serve" in getattr(sys, "orig_argv", []):
    if not os.environ.get("TITO_CALLGRIND_INSIDE"):  # re-run this very command under callgrind, counting off
        os.environ["TITO_CALLGRIND_INSIDE"] = "1"
        output = f"--callgrind-out-file={os.environ['TITO_CALLGRIND']}.%p"
        os.execv("/usr/bin/valgrind", ["valgrind", "--tool=callgrind", "--instr-atstart=no", output, *sys.orig_argv])
    threading.Thread(target=_count_from_the_sixth_turn, daemon=True).start()
