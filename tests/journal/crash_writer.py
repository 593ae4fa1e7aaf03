"""Child process of the crash test: appends scripted events from index argv[2] with fsync `always`, compacting in
the background, and prints each index once its append returned. The test kills it with SIGKILL at random."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.journal.events import scripted_event
from tito.journal.compaction import BackgroundCompactor
from tito.journal.recovery import open_journal


def main() -> None:
    directory, index = Path(sys.argv[1]), int(sys.argv[2])
    _, writer = open_journal(directory, "always", segment_bytes=3000)
    BackgroundCompactor(writer, every_s=0.02)
    while True:
        writer.append_blocking(scripted_event(index))
        print(index, flush=True)
        index += 1


if __name__ == "__main__":
    main()
