"""A session's trajectory: its committed generations as nodes, and the events that change it.

Knows nothing of HTTP. Every change is an event (`tito.trajectory.events`) applied by one method, so the
journal can persist the events and a restart can replay them into the same state.

Imports nothing from tito but errors.
"""

from __future__ import annotations

from tito.errors import ConfigurationError
from tito.trajectory.base import Trajectory
from tito.trajectory.events import SessionConfig, TrajectoryKind
from tito.trajectory.linear import LinearTrajectory


def create_trajectory(config: SessionConfig) -> Trajectory:
    """An empty trajectory of the kind `config` asks for (tree sessions import their module only when used)."""
    if config.trajectory is TrajectoryKind.LINEAR:
        return LinearTrajectory(config)
    try:
        from tito.trajectory.tree import TreeTrajectory  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ConfigurationError(
            "tree sessions need tito.trajectory.tree, which this build does not have; use trajectory 'linear'"
        ) from exc
    tree: Trajectory = TreeTrajectory(config)
    return tree


__all__ = ["LinearTrajectory", "SessionConfig", "Trajectory", "TrajectoryKind", "create_trajectory"]
