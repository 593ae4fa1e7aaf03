"""Reading sessions: the read API, the inspector's views and page, and exports as sessions.

Imports nothing from tito.
"""
