"""NeMo Gym 0.4.0, installed (the cached `trainers-py312` venv of scripts/trainer_venvs.sh, Python 3.12 as NeMo Gym
requires; its package without its server stack): each record validates as NeMo Gym's `BaseVerifyResponse`, each reply's
last item is one of its `*ForTraining` types, and their token ids, joined as NeMo RL joins them (each prompt continues
the previous prompt and generation), are the sample's ids."""

from __future__ import annotations

import pytest
from nemo_gym.base_resources_server import BaseVerifyResponse
from nemo_gym.openai_utils import TokenIDLogProbMixin

from tito.trajectory.exports import nemo_gym

from ..rollouts import rollout

pytestmark = pytest.mark.trainers


def test_each_record_is_a_verify_response_whose_training_items_rebuild_the_sample() -> None:
    samples = rollout()
    for sample, record in zip(samples, nemo_gym.export(samples), strict=True):
        verified = BaseVerifyResponse.model_validate(record)
        assert verified.reward == sample.reward
        trained = [item for item in verified.response.output if isinstance(item, TokenIDLogProbMixin)]
        assert len(trained) == len(sample.spans), "one training item per turn"
        tokens: list[int] = []
        for item in trained:
            assert item.prompt_token_ids[: len(tokens)] == tokens, "each prompt continues the last"
            tokens = item.prompt_token_ids + item.generation_token_ids
            assert len(item.generation_log_probs) == len(item.generation_token_ids)
        assert tokens == sample.tokens.tolist()
        roles = [getattr(item, "type", None) for item in verified.response.output]
        assert roles.count("function_call_output") == len(sample.spans) - 1, "each tool result is an item"
        assert [item.role for item in verified.responses_create_params.input] == ["system", "user"]
