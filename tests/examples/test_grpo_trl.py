"""examples/grpo_trl.py runs as a user would run it: sessions through tito, samples in TRL's format into TRL's real
GRPOTrainer (its rollout_func contract), one step on SmolLM2 with a finite loss that moves the weights.

Needs `tito[trainers]` (TRL 1.16, numpy 2), which .ci/run installs in its own venv; about a minute on 2 cores."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.trainers

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpo_trl.py"


def test_one_grpo_step_from_tito_samples_has_a_finite_loss_and_changes_the_weights() -> None:
    environment = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=900, env=environment)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = re.search(r"loss (\S+), largest weight change (\S+)", done.stdout)
    assert found, done.stdout
    loss, moved = float(found[1]), float(found[2])
    assert math.isfinite(loss) and moved > 0.0
