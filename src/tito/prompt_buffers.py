"""Buffers that turns' prompt ids are written into, written over again by later turns.

Every turn writes its whole prompt (the stored ids, then the appended ones): at 32k ids, 128 KiB. A new buffer each
turn is new memory in a long-running process: the buffer the last turn freed is a little short for this turn's
longer prompt, so the heap grows by a prompt and each of its 4 KiB pages faults when first written (~2 us a page on
this project's machine: ~65 us a turn at 32k ids, measured in a long test run's fragmented heap; issue 34). Buffers
kept and written over take no new pages, and a prompt's parts are written straight into one
(`BytesIO.writelines`), not joined first and then copied.

A prompt is a read-only int32 `memoryview` of its buffer. A buffer is written over only when no view of it is left:
`BytesIO` refuses to write while its memory is exported (BufferError). Buffers are tried in the order they were
written, the one most likely done with first. One still read goes to the back (a turn in flight: it is done soon),
unless a whole pool's worth of prompts was written since it was (something keeps it: a record of requests), then it
is let go to its readers. At most `TRIES` refused writes (~1 us each) are spent on buffers in use per prompt.

Imports nothing from tito.
"""

from __future__ import annotations

import threading
from array import array
from collections import deque
from collections.abc import Sequence
from io import BytesIO

__all__ = ["PromptBuffers"]


class PromptBuffers:
    """Up to `MAX_BUFFERS` buffers and `max_bytes` in all (by the longest prompt each held), none above
    `MAX_BUFFER_BYTES`. Thread-safe: prompts built in worker threads never share a buffer."""

    MAX_BYTES = 64 << 20
    MAX_BUFFERS = 256
    """Enough for as many turns in flight at once."""
    MAX_BUFFER_BYTES = 4 << 20
    """1M ids; a longer prompt gets a buffer of its own, not kept."""
    TRIES = 3

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buffers: deque[tuple[BytesIO, int, int]] = deque()
        """Each with the longest prompt it held (what it holds on to) and the count of writes when it was written."""
        self._held = 0
        self._writes = 0
        self._lock = threading.Lock()
        self.reused = 0
        """How many prompts were written over an earlier one (the rest took a new buffer)."""

    def __len__(self) -> int:
        """How many buffers are kept."""
        return len(self._buffers)

    def write(self, parts: Sequence[array[int] | memoryview | bytes]) -> memoryview:
        """The ids of `parts` (each a buffer of int32: an `array('i')`, a view of one, packed bytes) in order, as one
        read-only int32 view."""
        refused, tries = 0, min(self.TRIES, len(self._buffers))
        while refused < tries:
            with self._lock:
                if not self._buffers:
                    break
                buffer, size, written_at = self._buffers.popleft()
                self._held -= size
            buffer.seek(0)
            try:
                buffer.writelines(parts)
            except BufferError:  # an earlier prompt written there is still read
                with self._lock:
                    if self._writes - written_at < self.MAX_BUFFERS:
                        self._buffers.append((buffer, size, written_at))
                        self._held += size
                        refused += 1
                continue
            return self._keep(buffer, size, reused=True)
        buffer = BytesIO()
        buffer.writelines(parts)
        return self._keep(buffer, 0, reused=False)

    def _keep(self, buffer: BytesIO, size: int, reused: bool) -> memoryview:
        written = buffer.tell()
        prompt = buffer.getbuffer()[:written].cast("i").toreadonly()  # shared memory: no reader writes it
        size = max(size, written)
        with self._lock:
            self.reused += reused
            self._writes += 1
            if size <= self.MAX_BUFFER_BYTES:
                self._buffers.append((buffer, size, self._writes))
                self._held += size
                while self._held > self.max_bytes or len(self._buffers) > self.MAX_BUFFERS:
                    self._held -= self._buffers.popleft()[1]
        return prompt
