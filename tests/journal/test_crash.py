"""kill -9 a process appending to the journal (fsync `always`, background compaction) at random points, reopen
it, continue, repeat: every acknowledged event is present, no half record survives, live sessions' events are
bit-identical to the script, and compaction never loses a live session's record. Bounded: 6 kills, ~5 s."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.journal.events import deleted_by_script, same_event, script_index, scripted_event
from tito.journal.replay import replay

ROOT = Path(__file__).resolve().parents[2]


def _run_and_kill(directory: Path, start: int, after_s: float) -> list[int]:
    """Start the writer child from `start`, SIGKILL it `after_s` after its first acknowledgement; what it acked."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.journal.crash_writer", str(directory), str(start)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    acked: list[int] = []
    first = threading.Event()

    def read() -> None:
        for line in child.stdout or ():
            acked.append(int(line))
            first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        started = first.wait(timeout=60)
        time.sleep(after_s)
        alive = child.poll() is None
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        reader.join(timeout=10)
    assert started and alive, f"the writer child failed: {child.stderr.read() if child.stderr else ''}"
    return acked


def test_kill_9_at_random_points_loses_no_acknowledged_event_and_leaves_no_half_record(tmp_path: Path) -> None:
    rng = random.Random(14)
    next_index = 0
    acked_all: set[int] = set()
    for _ in range(6):
        acked = _run_and_kill(tmp_path, next_index, after_s=rng.uniform(0.0, 0.4))
        acked_all.update(acked)
        replayed = replay(tmp_path)
        damage = replayed.report.damage
        assert damage is None or "torn" in damage.reason, damage
        assert replayed.report.dropped_segments == () and replayed.report.orphaned_sessions == ()
        indices = [script_index(e) for e in replayed.events]
        assert indices == sorted(indices), "events replay in the order they were written"
        written = max([next_index - 1, *indices, *acked]) + 1
        present = set(indices)
        for index in acked_all:
            if not deleted_by_script(scripted_event(index).session_id, written):
                assert index in present, f"acknowledged event {index} is missing"
        live = [i for i in range(written) if not deleted_by_script(scripted_event(i).session_id, written)]
        replayed_live = [e for e in replayed.events if not deleted_by_script(e.session_id, written)]
        assert [script_index(e) for e in replayed_live] == live
        assert all(same_event(e, scripted_event(i)) for e, i in zip(replayed_live, live, strict=True))
        next_index = written
    assert len(acked_all) > 20, "the child wrote enough to make the kills meaningful"
