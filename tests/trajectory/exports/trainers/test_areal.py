"""AReaL 1.0.4, installed (the cached `trainers-verl` venv of scripts/trainer_venvs.sh, its package without its GPU
stack): tito's episodes, built into tensors as AReaL's workflows build them, join through AReaL's own
`concat_padded_tensors` into one padded batch that holds each sample's ids, mask, logprobs, integer versions and
reward."""

from __future__ import annotations

import pytest
import torch
from areal.utils.data import concat_padded_tensors

from tito.trajectory.exports import areal

from ..rollouts import rollout

pytestmark = pytest.mark.trainers


def test_the_episodes_join_into_areals_padded_batch() -> None:
    samples = rollout()
    episodes = [
        {key: torch.tensor([value], dtype=getattr(torch, areal.DTYPES[key])) for key, value in episode.items()}
        for episode in (record["episode"] for record in areal.export(samples))
    ]
    batch = concat_padded_tensors(episodes)
    assert batch["input_ids"].shape == (3, max(len(sample.tokens) for sample in samples))
    for row, sample in enumerate(samples):
        real = batch["attention_mask"][row]
        assert batch["input_ids"][row][real].tolist() == sample.tokens.tolist()
        assert batch["loss_mask"][row][real].tolist() == sample.loss_mask.tolist()
        assert torch.equal(batch["logprobs"][row][real], torch.tensor(sample.rollout_logprobs.tolist()))
        versions = batch["versions"][row][real].tolist()
        assert {v for v, m in zip(versions, sample.loss_mask, strict=True) if not m} == {-1}
        sampled_under = {3, 4} if len(sample.spans) > 1 else {3}
        assert {v for v, m in zip(versions, sample.loss_mask, strict=True) if m} == sampled_under
        assert batch["rewards"][row].item() == sample.reward
