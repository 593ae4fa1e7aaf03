"""One GRPO step with TRL on CPU from tito samples: agent -> tito -> samples (format `trl`) -> trainer step.

SmolLM2-135M-Instruct (the embedded default model) serves on tito's local engine and is the policy TRL trains.
TRL's GRPOTrainer asks for rollouts through its `rollout_func`: for each prompt (TRL repeats each one
`num_generations` times) an agent runs a two-turn session through the openai SDK, scores its final reply, and takes
the session's samples in TRL's format (`POST /sessions/{id}/samples` with `format: trl`, the reward keyed by the
reply's response id, the prompt's index as group id). TRL then takes one optimiser step on the same weights the
engine sampled with. Prints the loss and how far the weights moved; exits 1 unless the loss is finite and the
weights changed.

    pip install -e '.[trainers]'        # TRL 1.16 (its datasets/pyarrow need numpy 2)
    python examples/grpo_trl.py
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import httpx
import openai
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

from tito.engines.local import default_model_dir
from tito.server import ServerOptions, create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import serve_in_thread

PROMPTS = ["Count to three.", "Name a colour."]
GROUP = 4
"""Sessions per prompt: the GRPO group whose rewards are normalised together."""
TARGET_CHARS = 40
"""The agent's reward prefers a final reply of about this many characters: a signal that varies within a group even
when every reply runs to the token limit (equal rewards would make GRPO's advantage, and the step, zero)."""
MAX_TOKENS = 24


def run_session(base_url: str, prompt: str, group_id: str, seed: int) -> dict[str, Any]:
    """One agent episode: two turns, a reward for the final reply, the samples as TRL columns."""
    session_id = httpx.post(f"{base_url}/sessions", json={"group_id": group_id}).json()["session_id"]
    sdk = openai.OpenAI(base_url=f"{base_url}/sessions/{session_id}/v1", api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": prompt}]
    for follow_up in ["Go on.", None]:
        reply = sdk.chat.completions.create(
            model="m", messages=messages, max_tokens=MAX_TOKENS, temperature=1.0, seed=seed
        )
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        if follow_up is None or reply.choices[0].finish_reason == "length":
            break  # a reply cut by the length limit cannot be continued: the episode ends there
        messages.append({"role": "user", "content": follow_up})
    reward = -abs(len(reply.choices[0].message.content or "") - TARGET_CHARS) / TARGET_CHARS
    body = {"format": "trl", "rewards": {reply.id: reward}}
    response = httpx.post(f"{base_url}/sessions/{session_id}/samples", json=body)
    response.raise_for_status()
    httpx.delete(f"{base_url}/sessions/{session_id}")
    columns: dict[str, Any] = response.json()["samples"]
    return columns


def rollouts(base_url: str, prompts: list[Any]) -> dict[str, list[Any]]:
    """TRL's rollout_func result for `prompts`: one tito session each, columns concatenated in order."""
    batch: dict[str, list[Any]] = {}
    for seed, prompt in enumerate(prompts):  # a seed per session: the episode is reproducible, the group varies
        columns = run_session(base_url, str(prompt), group_id=f"prompt-{PROMPTS.index(prompt)}", seed=seed)
        for key, values in columns.items():
            batch.setdefault(key, []).extend(values)
    return batch


def tito_reward(completions: list[Any], reward: list[float], **_: Any) -> list[float]:
    """The reward tito's samples carry (the agent posted it per response id)."""
    return reward


def train_one_step(work: Path) -> tuple[float, float]:
    """(the step's loss, the largest absolute change of any weight); `work` holds the trainer's files."""
    model_dir = default_model_dir()
    state = build_state(ServerOptions(), engine="local", model_dir=model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    before = {name: value.detach().clone() for name, value in model.named_parameters()}
    config = GRPOConfig(
        output_dir=str(work / "trainer"), use_cpu=True, max_steps=1, learning_rate=1e-2, beta=0.0,
        per_device_train_batch_size=GROUP, num_generations=GROUP, max_completion_length=256,
        logging_steps=1, report_to="none", save_strategy="no", bf16=False, seed=0, dataloader_num_workers=0,
    )  # fmt: skip
    with serve_in_thread(create_app(state)) as base_url:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=tito_reward,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
            processing_class=PreTrainedTokenizerFast.from_pretrained(model_dir),
            rollout_func=lambda prompts, trainer: rollouts(base_url, prompts),
        )
        result = trainer.train()
    moved = max((value.detach() - before[name]).abs().max().item() for name, value in model.named_parameters())
    return float(result.training_loss), moved


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tito-grpo-") as work:
        loss, moved = train_one_step(Path(work))
    print(f"GRPO step from tito samples: loss {loss:.6f}, largest weight change {moved:.3e}")
    return 0 if math.isfinite(loss) and moved > 0.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
