"""A session's trajectory: its committed generations as nodes, and the events that change it.

Knows nothing of HTTP. Every change is an event (`tito.trajectory.events`) applied by one method, so the
journal can persist the events and a restart can replay them into the same state.

Imports nothing from tito.
"""
