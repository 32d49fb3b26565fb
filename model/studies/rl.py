"""Reinforcement-learning post-training (GRPO, PPO): one step, composed from the serving and the
training estimates on the same op formulas.

One step of on-policy RL with verifiable rewards (as verl's ``RayPPOTrainer.fit`` runs it:
generate, ``compute_log_prob``, ``compute_ref_log_prob``, for PPO ``compute_values`` and the
reward model, then ``update_actor`` / ``update_critic`` and the weight sync to the rollout
engine) is priced as:

* **generation** of P × K rollouts (P prompts, K samples each, I prompt tokens, O answer tokens
  on average, O_max the longest) by the serving model (:func:`model.serving.serve.serve_request`)
  at a concurrency of P·K users, the layout searched: t_gen = TTFT + P·K·O / R + (O_max − O)·
  TPOT₁, R the pool's output tokens/s. Continuous batching keeps the slots full until the
  queue drains; then the longest answers finish nearly alone — the straggler tail, priced at
  TPOT₁, the step time of one sequence per instance of the same layout (a lower bound: a few
  answers still run beside the longest; at small batches a decode step is bound by reading
  the weights, so its time barely depends on the batch);
* **forward passes** over the P·K sequences of I + O tokens — the old policy's log-probs and
  the reference model's (GRPO: 2), plus the reward model and the critic's values (PPO: 4) —
  each at the serving model's prefill rate (offline, one output token) on the training GPUs;
* **the update**: the training search of the policy on P·K sequences of I + O tokens (one
  optimizer step per RL step; PPO trains a critic of the same size too: twice);
* **weight sync** of the policy's BF16 weights W = 2·params to the generation layout (tp_g
  GPUs per instance, each holding W/tp_g): colocated, gathered over NVLink on the same GPUs;
  split, received over each generation GPU's NICs and sent by the training GPUs (the slower
  side sets the time);
* **colocated offload**: the GPUs alternate, so the training state (gradients, optimizer)
  leaves HBM for the host during generation and comes back (verl's optimizer offload), twice
  its bytes over the host link per step (none without a host tier: then it stays in HBM).

Placements: **colocated** — every GPU runs every phase, in sequence; **split** — G GPUs
generate and N − G train: on-policy, step = t_gen + t_sync + (forwards + update), each pool
idle while the other works; ``off_policy`` (one step stale), step = max(t_gen, forwards +
update) + t_sync. G is searched over node-size multiples unless given. The idle GPU share is
the GPU-seconds spent waiting over N·step (colocated: the straggler tail, when few sequences
keep every GPU of the pool).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from model.engine.api import search_request
from model.engine.economics import cost_columns
from model.engine.request import Request
from model.errors import ModelError
from model.serving.serve import serve_request
from model.specs.hardware import System
from model.specs.params import total_params
from model.specs.schema import Field, check_field
from model.specs.serving import WORKLOAD_FIELD, Serving
from model.specs.transformer import Transformer

PLACEMENTS = ("colocated", "split")
ALGORITHMS = ("grpo", "ppo")
FORWARD_PASSES = {"grpo": 2, "ppo": 4}  # old log-probs + reference (+ reward model, values)
TRAINED_MODELS = {"grpo": 1, "ppo": 2}  # the policy (+ the critic)
MAX_SPLITS = 32  # generation-pool sizes tried by the split search
MAX_ROLLOUTS = 1_000_000  # prompts × samples per step this estimator prices
_TOKENS = WORKLOAD_FIELD["input_tokens"]  # a rollout is a served request: the same token range

# each input of an RL step declared once: the record, the CLI's help and the page's form read it
RL_FIELDS = (
    Field("prompts", int, "prompts per step P", 1, MAX_ROLLOUTS, required=True),
    Field("samples", int, "samples (rollouts) per prompt K", 1, MAX_ROLLOUTS, required=True),
    Field("input_tokens", int, "prompt length I, tokens", _TOKENS.lo, _TOKENS.hi,
          required=True, unit="tokens"),
    Field("output_tokens", int, "mean answer length O, tokens", _TOKENS.lo, _TOKENS.hi,
          required=True, unit="tokens"),
    Field("max_output_tokens", int, "longest answer O_max, tokens (at least the mean)",
          _TOKENS.lo, _TOKENS.hi, required=True, unit="tokens"),
    Field("placement", str, "colocated (every GPU runs every phase) or split (G GPUs "
          "generate, the rest train)", default="colocated", choices=PLACEMENTS),
    Field("algorithm", str, "GRPO (policy only) or PPO (policy and critic)", default="grpo",
          choices=ALGORITHMS),
    Field("off_policy", bool, "split: generate step t+1 while training on step t (one step "
          "stale)", default=False),
    Field("precision", str, "generation weights", default="bf16", choices=("bf16", "fp8")),
)
RL_FIELD: dict[str, Field] = {f.name: f for f in RL_FIELDS}
# the run's length, for its days and cost (not part of one step)
RL_STEPS = Field("steps", int, "RL steps of the run, for its days and cost", 1, 10_000_000,
                 default=1000)


@dataclass(frozen=True)
class RlStep:
    """One RL step's workload (module docstring; token counts per sequence)."""

    prompts: int
    samples: int
    input_tokens: int
    output_tokens: int
    max_output_tokens: int
    placement: str = "colocated"
    algorithm: str = "grpo"
    off_policy: bool = False
    precision: str = "bf16"

    kind = "rl"

    def __post_init__(self) -> None:
        for f in RL_FIELDS:
            check_field("RL step", f, getattr(self, f.name))
        if self.prompts * self.samples > MAX_ROLLOUTS:
            raise ModelError(f"{self.prompts} prompts × {self.samples} samples is over a "
                             "million rollouts per step; this estimator stops there")
        if self.max_output_tokens < self.output_tokens:
            raise ModelError(f"the longest answer ({self.max_output_tokens} tokens) is shorter "
                             f"than the mean ({self.output_tokens})")
        if self.off_policy and self.placement != "split":
            raise ModelError("off-policy overlap needs the split placement")

    @property
    def rollouts(self) -> int:
        return self.prompts * self.samples


@dataclass
class Phases:
    """Seconds of each phase of one step on given pools (module docstring)."""

    generation_s: float
    tail_s: float
    reference_s: float
    training_s: float
    sync_s: float
    offload_s: float
    generation_layout: dict
    training_layout: dict
    usd_per_gpu_hour: float = 0.0  # the system's price (its cost inputs), for the step's cost


@dataclass
class RlResult:
    """One RL step: its phases, the placement's step time and idle share."""

    step: RlStep
    phases: Phases
    gpus: int
    generation_gpus: int
    step_s: float
    idle_gpu_share: float
    # (generation GPUs, step seconds) of every split tried (split placement only)
    splits: tuple[tuple[int, float], ...] = ()

    def cost_per_step_usd(self) -> float | None:
        """USD of one step on all its GPUs; None when the system has no price."""
        usd = self.gpus * self.step_s / 3600.0 * self.phases.usd_per_gpu_hour
        return usd if math.isfinite(usd) else None

    def summary(self) -> dict:
        p = self.phases
        return {"algorithm": self.step.algorithm, "placement": self.step.placement,
                "off_policy": self.step.off_policy, "gpus": self.gpus,
                "generation_gpus": self.generation_gpus,
                "training_gpus": self.gpus if self.step.placement == "colocated"
                else self.gpus - self.generation_gpus,
                "step_s": self.step_s, "generation_s": p.generation_s, "tail_s": p.tail_s,
                "reference_s": p.reference_s, "training_s": p.training_s,
                "sync_s": p.sync_s, "offload_s": p.offload_s,
                "idle_gpu_share": self.idle_gpu_share,
                "rollouts_per_step": self.step.rollouts,
                "cost_per_step_usd": self.cost_per_step_usd(),
                "generation_layout": p.generation_layout,
                "training_layout": p.training_layout}


def compose(placement: str, off_policy: bool, p: Phases, gpus: int, gen_gpus: int
            ) -> tuple[float, float]:
    """(step seconds, idle GPU share) of phases on a placement (module docstring)."""
    train = p.reference_s + p.training_s
    if placement == "colocated":
        step = p.generation_s + train + p.sync_s + p.offload_s
        return step, p.tail_s / step
    train_gpus = gpus - gen_gpus
    if off_policy:
        step = max(p.generation_s, train) + p.sync_s
    else:
        step = p.generation_s + p.sync_s + train
    busy = gen_gpus * p.generation_s + train_gpus * train + gpus * p.sync_s
    return step, 1.0 - busy / (gpus * step)


def _generation(model: Transformer, system: System, gpus: int, step: RlStep
                ) -> tuple[float, float, float, dict]:
    """(t_gen, straggler tail, TPOT, layout) of the rollouts on ``gpus`` GPUs."""
    work = {"input_tokens": step.input_tokens, "output_tokens": step.output_tokens,
            "mode": "concurrency", "concurrency": step.rollouts,
            "weight_precision": step.precision}
    best = serve_request(Request(model, system, Serving(work, gpus, {}))).best
    if not best.get("fits", True) or not best.get("output_tokens_per_s"):
        raise ModelError(f"{model.name} does not fit for generation on {gpus} GPUs of "
                         f"{system.name}")
    layout = {k: float(best[k]) if k == "batch" else int(best[k])
              for k in ("tp", "pp", "replicas", "batch")}
    tail = 0.0
    if step.max_output_tokens > step.output_tokens:  # the longest answers, one per instance
        alone = {**work, "concurrency": layout["replicas"]}
        pinned = {"tp": layout["tp"], "pp": layout["pp"], "replicas": layout["replicas"]}
        last = serve_request(Request(model, system, Serving(alone, gpus, pinned))).best
        tail = (step.max_output_tokens - step.output_tokens) * float(last["tpot_s"])
    t_gen = float(best["ttft_s"]) + step.rollouts * step.output_tokens / float(
        best["output_tokens_per_s"]) + tail
    return t_gen, tail, float(best["tpot_s"]), layout


def _forwards(model: Transformer, system: System, gpus: int, step: RlStep) -> float:
    """Seconds of the algorithm's forward passes over the rollouts on ``gpus`` GPUs."""
    work = {"input_tokens": step.input_tokens + step.output_tokens, "output_tokens": 1,
            "mode": "offline", "weight_precision": "bf16"}
    best = serve_request(Request(model, system, Serving(work, gpus, {}))).best
    return FORWARD_PASSES[step.algorithm] * step.rollouts / float(best["requests_per_s"])


def _training(model: Transformer, system: System, gpus: int, step: RlStep,
              stack: str | None) -> tuple[float, dict, float, float]:
    """(update seconds, layout, training state bytes per GPU, $ per GPU-hour) on ``gpus``
    GPUs."""
    request = Request.build(model, system, global_batch=step.rollouts, gpus=gpus,
                            strategy="1d", stack=stack)
    result = search_request(request)
    if result.top.empty:
        raise ModelError(f"no layout trains {model.name} on {step.rollouts} sequences of "
                         f"{model.seq_len} tokens on {gpus} GPUs of {system.name}")
    row = result.top.iloc[0]
    layout = {k: int(row[k]) for k in ("tp1", "pp", "dp", "microbatch")}
    state = (float(row["gradients_gb"]) + float(row["optimizer_gb"])) * 1e9
    # the price of one GPU-hour under the system's cost inputs (rental or purchase); taken
    # from the row's own ratio it is 0/0 when the run is too short to register GPU-hours
    price = float(cost_columns(model, system, 1, 1.0 / 24.0)["cost_usd"])
    return TRAINED_MODELS[step.algorithm] * float(row["iteration_time_s"]), layout, state, price


def _phases(model: Transformer, system: System, gpus: int, gen_gpus: int, step: RlStep,
            stack: str | None) -> Phases:
    train_gpus = gpus if step.placement == "colocated" else gpus - gen_gpus
    seq_model = model.with_overrides(seq_len=step.input_tokens + step.output_tokens)
    t_gen, tail, _, gen_layout = _generation(seq_model, system, gen_gpus, step)
    t_ref = _forwards(seq_model, system, train_gpus, step)
    t_train, train_layout, state, price = _training(seq_model, system, train_gpus, step, stack)
    shard = 2.0 * total_params(model) / gen_layout["tp"]  # BF16 weights per generation GPU
    if step.placement == "colocated":
        sync = shard / system.fast_bytes_per_s
        host = system.host_bandwidth_gb_per_s * 1e9
        offload = 2.0 * state / host if host > 0 else 0.0
    else:
        receive = shard / (system.slow_bytes_per_s * system.nics_per_gpu)
        send = gen_layout["replicas"] * 2.0 * total_params(model) / (
            train_gpus * system.slow_bytes_per_s * system.nics_per_gpu)
        sync, offload = max(receive, send), 0.0
    return Phases(t_gen, tail, t_ref, t_train, sync, offload, gen_layout, train_layout, price)


def _splits(system: System, gpus: int) -> list[int]:
    """Generation-pool sizes to try: node-size multiples leaving both pools non-empty, at most
    :data:`MAX_SPLITS` of them evenly spaced."""
    node = max(1, system.node_size)
    sizes = list(range(node, gpus, node)) or [g for g in range(1, gpus)]
    if not sizes:
        raise ModelError(f"a split placement needs at least 2 GPUs, got {gpus}")
    stride = max(1, -(-len(sizes) // MAX_SPLITS))
    return sizes[::stride]


def rl_step(model: Transformer, system: System, gpus: int, step: RlStep, *,
            stack: str | None = None, generation_gpus: int | None = None) -> RlResult:
    """One RL step of ``step`` on ``gpus`` GPUs (module docstring); for a split placement the
    generation pool ``generation_gpus`` or, when None, the size with the shortest step."""
    if step.placement == "colocated":
        phases = _phases(model, system, gpus, gpus, step, stack)
        step_s, idle = compose("colocated", False, phases, gpus, gpus)
        return RlResult(step, phases, gpus, gpus, step_s, idle)
    if generation_gpus is not None and not 1 <= generation_gpus < gpus:
        raise ModelError(f"--generation-gpus must leave GPUs to train: 1 to {gpus - 1}, got "
                         f"{generation_gpus}")
    best: RlResult | None = None
    errors, tried = [], []
    for g in [generation_gpus] if generation_gpus else _splits(system, gpus):
        try:
            phases = _phases(model, system, gpus, g, step, stack)
        except ModelError as exc:  # this split does not fit: try the others
            errors.append(str(exc))
            continue
        step_s, idle = compose("split", step.off_policy, phases, gpus, g)
        tried.append((g, step_s))
        if best is None or step_s < best.step_s:
            best = RlResult(step, phases, gpus, g, step_s, idle)
    if best is None:
        raise ModelError(f"no split of {gpus} GPUs fits both generation and training "
                         f"({errors[-1] if errors else 'no split tried'}): more GPUs, or "
                         "the colocated placement")
    best.splits = tuple(tried)
    return best
