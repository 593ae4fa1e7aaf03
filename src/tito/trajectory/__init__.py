"""A session's trajectory: its committed generations as nodes, and the events that change it.

Knows nothing of HTTP. Every change is an event (`tito.trajectory.events`) applied by one method, so the
journal can persist the events and a restart can replay them into the same state.

Imports nothing from tito but errors.
"""

from __future__ import annotations

from tito.trajectory.base import Trajectory
from tito.trajectory.episode import Episode
from tito.trajectory.events import SessionConfig, TrajectoryKind
from tito.trajectory.linear import LinearTrajectory
from tito.trajectory.tree import TreeTrajectory


def create_episode(config: SessionConfig) -> Episode:
    """An empty session: an episode whose conversations are trajectories of the kind `config` asks for."""
    return Episode(config)


def create_trajectory(config: SessionConfig) -> Trajectory:
    """An empty one-conversation trajectory of the kind `config` asks for."""
    if config.trajectory is TrajectoryKind.LINEAR:
        return LinearTrajectory(config)
    return TreeTrajectory(config)


__all__ = [
    "Episode",
    "LinearTrajectory",
    "SessionConfig",
    "Trajectory",
    "TrajectoryKind",
    "TreeTrajectory",
    "create_episode",
    "create_trajectory",
]
