"""Deviations from the official templates that several fixed templates share, worded once.

Imports nothing from tito.
"""

VERBATIM_ASSISTANT_CONTENT = (
    "an assistant's content renders verbatim and its reasoning comes only from reasoning_content (a missing one is "
    "empty); official: with no reasoning_content, content is split on `<think>`/`</think>`, so a compaction summary or "
    "few-shot assistant quoting think tags loses the text before them"
)
"""Pinned by tests/families/test_deviations.py."""
