"""The session server: OpenAI-compatible chat completions per session, recording exact ids for training.

`create_app(ServerState)` builds the FastAPI app; `tito serve` runs it with uvicorn. Nothing in the library
imports the server; only the CLI does.

Imports nothing from tito.
"""

from tito.server.app import create_app
from tito.server.sessions.registry import EventSink, Session, SessionRegistry
from tito.server.state import ServerOptions, ServerState

__all__ = ["EventSink", "ServerOptions", "ServerState", "Session", "SessionRegistry", "create_app"]
