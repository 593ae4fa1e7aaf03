"""The session journal: an append-only, checksummed log of session events, replayed after a restart.

Layout (dependencies point down): recovery (open for a server: replay + repair + writer), compaction, inspect
-> export (samples for a trainer) -> writer, replay -> codec (events <-> payloads), framing (records in segment
bytes), segments (file names). Knows nothing of HTTP; its modules import only errors and trajectory.events, but
export, which assembles samples with the trajectory's own code. Imports from tito: journal (its modules).
"""

from tito.journal.compaction import BackgroundCompactor, CompactionResult, compact, dead_sessions
from tito.journal.recovery import open_journal
from tito.journal.replay import Damage, Replay, ReplayReport, SessionLog, replay
from tito.journal.writer import FsyncPolicy, JournalWriter

__all__ = [
    "BackgroundCompactor",
    "CompactionResult",
    "Damage",
    "FsyncPolicy",
    "JournalWriter",
    "Replay",
    "ReplayReport",
    "SessionLog",
    "compact",
    "dead_sessions",
    "open_journal",
    "replay",
]
