"""Live sessions: the registry (every change an event), resend accounting, the journal, conversation lineage, and the
samples route's work.

Imports nothing from tito.
"""
