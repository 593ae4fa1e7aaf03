"""`tito journal inspect DIR`: the sessions and turns a journal holds, read-only (no lock, no repair).

Exit 0 when the journal reads to its end, 1 when it is damaged (the report says where) or unreadable.

Imports from tito: errors, journal.export (its subcommand), journal.replay, journal.segments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tito.errors import JournalError
from tito.journal.export import add_export_command
from tito.journal.replay import SessionLog, replay
from tito.journal.segments import list_segments


def describe_journal(directory: Path, now: float) -> dict[str, Any]:
    """JSON-ready summary: segments, damage, and per session its status at `now` and its turns."""
    if not directory.is_dir():
        raise JournalError(f"no journal directory at {directory}")
    replayed = replay(directory)
    report = replayed.report
    return {
        "directory": str(directory),
        "segments": len(list_segments(directory)),
        "bytes": sum(p.stat().st_size for p in list_segments(directory)),
        "records": report.records_read,
        "damage": None if report.damage is None else str(report.damage),
        "dropped_segments": [str(p) for p in report.dropped_segments],
        "orphaned_sessions": list(report.orphaned_sessions),
        "sessions": [_describe_session(log, now) for log in replayed.sessions.values()],
    }


def _describe_session(log: SessionLog, now: float) -> dict[str, Any]:
    return {
        "session_id": log.session_id,
        "status": log.status(now),
        "trajectory": log.created.config.trajectory.value,
        "created_at": log.created.at,
        "last_activity": log.last_activity,
        "samples_taken": log.samples_taken,
        "turns": [
            {
                "node_id": turn.node_id,
                "parent_id": turn.parent_id,
                "prompt_ids": len(turn.prompt_ids),
                "output_ids": len(turn.output_ids),
                "finish_reason": turn.finish_reason,
                "at": turn.at,
            }
            for turn in log.turns
        ],
    }


def run_inspect(args: argparse.Namespace) -> int:
    summary = describe_journal(Path(args.directory), time.time())
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        print(f"{summary['directory']}: {summary['segments']} segment(s), {summary['bytes']} bytes, "
              f"{summary['records']} records, {len(summary['sessions'])} session(s)")  # fmt: skip
        for session in summary["sessions"]:
            turns = session["turns"]
            sampled = sum(t["output_ids"] for t in turns)
            print(f"{session['session_id']}  {session['status']:8} {session['trajectory']:6} {len(turns)} turn(s) "
                  f"{sampled} sampled ids  samples taken {session['samples_taken']}")  # fmt: skip
            for turn in turns:
                print(f"  node {turn['node_id']:<4} parent {turn['parent_id']!s:<4} prompt {turn['prompt_ids']:<6} "
                      f"output {turn['output_ids']:<6} {turn['finish_reason']}")  # fmt: skip
    if summary["damage"] is not None:
        print(f"damaged: {summary['damage']}; later segments not read: {len(summary['dropped_segments'])}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def add_journal_command(commands: Any) -> None:
    """Register `tito journal inspect` and `tito journal export` on the CLI's subcommands."""
    journal = commands.add_parser("journal", help="read a session journal written by `tito serve --journal DIR`")
    actions = journal.add_subparsers(dest="journal_command", required=True)
    inspect = actions.add_parser(
        "inspect", help="list the journal's sessions (status, turns, token counts) and any damage",
        epilog="example: tito journal inspect /var/lib/tito/journal --json",
    )  # fmt: skip
    inspect.add_argument("directory", metavar="DIR", help="the journal directory")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument("--debug", action="store_true", help="show tracebacks")
    inspect.set_defaults(run=run_inspect)
    add_export_command(actions)
