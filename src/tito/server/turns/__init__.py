"""One turn's path: prepare, generate, finish (parse, record, commit) and reply, whole or streamed; the engine as the
server calls it; aborting; the turn gate and the weight-update drain; retry markers.

Imports nothing from tito.
"""
