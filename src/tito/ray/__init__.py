"""tito on Ray (`pip install tito[ray]`): `launch` starts tito servers as Ray actors, one per node by default, and
returns a `RaySessionPool` over them (docs/rl-run.md).

Modules: actor (one server inside an actor: node-local journal, the same port across restarts), launch (placing the
actors, the pool, Ray's word on dead actors).

Imports from tito: ray.launch.
"""

from tito.ray.launch import RaySessionPool, launch

__all__ = ["RaySessionPool", "launch"]
