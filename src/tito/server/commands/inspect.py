"""`tito inspect JOURNAL_DIR|EXPORT_FILE` (options in cli.py): the page and the read API over a journal, offline.

No engine and no session server: the journal is replayed (again whenever its files change, so a journal that a
running server writes shows new turns), never locked or repaired; a samples export (`tito journal export`) is read
once (`tito.server.inspection.export_sessions`). With `--family` (and `--tokenizer`) the turn
view shows text pieces, junction ids and tool-call parse statuses; without, ids only.

Imports from tito: errors, family_tokenizer, server.app, server.commands, server.errors,
server.inspection, server.metrics, server.replies, tokenizer, tokenizer_loading.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response

from tito.errors import TitoError
from tito.server.app import ApiKeyMiddleware
from tito.server.commands.running import serve_in_thread
from tito.server.errors import error_body
from tito.server.inspection.export_sessions import ExportSessions
from tito.server.inspection.read_api import JournalSessions, SessionSource, read_routes
from tito.server.inspection.ui import InspectorPageMiddleware
from tito.server.metrics import ServerMetrics
from tito.server.replies import error_response
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer


def build_inspect_app(source: SessionSource, api_key: str | None = None) -> FastAPI:
    """The read routes and the page over `source`, under the same key rule as `tito serve`."""
    app = FastAPI(title="tito inspect")
    if api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key, metrics=ServerMetrics())
    app.add_middleware(InspectorPageMiddleware)

    @app.exception_handler(TitoError)
    async def tito_error(request: Request, exc: TitoError) -> Response:
        return error_response(error_body(exc), exc.http_status)

    app.router.routes.extend(read_routes(source).routes)  # as the server's app adds its rooms' routes
    return app


def _tito_tokenizer(family: str | None, tokenizer: str | None) -> TitoTokenizer | None:
    if family is None:
        return None
    if tokenizer:
        from tito.tokenizer_loading import load_tokenizer

        return get_tito_tokenizer(load_tokenizer(tokenizer), family)
    from tito.family_tokenizer import builtin_tokenizer_for

    return get_tito_tokenizer(builtin_tokenizer_for(family)[0], family)


def run_inspect(args: argparse.Namespace) -> int:
    path, tito_tokenizer = Path(args.directory), _tito_tokenizer(args.family, args.tokenizer)
    source: JournalSessions | ExportSessions = (
        ExportSessions(path, tito_tokenizer) if path.is_file() else JournalSessions(path, tito_tokenizer)
    )
    source.sessions()  # a damaged or foreign journal fails here, before the URL is printed
    if source.damage is not None:
        print(f"tito inspect: the journal is damaged ({source.damage}); showing the records before it",
              file=sys.stderr)  # fmt: skip
    app = build_inspect_app(source, args.api_key)
    with serve_in_thread(app, args.host, args.port) as url:
        print(f"tito inspect: {len(source.sessions())} session(s) from {args.directory}; open {url}/ui "
              "(Ctrl-C stops)", flush=True)  # fmt: skip
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0
