"""``tperf finetune`` and ``tperf rl``: post-training questions (docs/post_training.md).

``finetune`` searches the fastest layout that fine-tunes a model by full SFT, LoRA or QLoRA on
N GPUs and prints days, tokens/s per GPU, memory, trainable parameters and cost; ``rl`` prices
one step of GRPO/PPO (rollouts, reference/reward passes, the policy update, the weight sync)
with colocated or split GPUs. Bad input: one line ``error: ...``, exit 2.
"""

from __future__ import annotations

import argparse
from typing import Any

from model.cli.args import CliError, positive_int, positive_number, print_json
from model.cli.costs import add_cost_args, costs_from_args
from model.engine.request import Request
from model.errors import ModelError
from model.specs.hardware import load_system
from model.specs.models import load_model
from model.specs.schema import check_field
from model.studies.finetune import METHODS, PACKING, TOKENS, FineTune, finetune
from model.studies.rl import ALGORITHMS, PLACEMENTS, RL_FIELD, RL_STEPS, RlStep, rl_step

TARGETS = {"attn": "attn", "mlp": "mlp", "attn,mlp": "all", "mlp,attn": "all", "all": "all",
           "qkv": "qkv"}


def _targets(text: str) -> str:
    key = text.replace(" ", "").lower()
    if key not in TARGETS:
        raise argparse.ArgumentTypeError(f"expected attn, mlp, attn,mlp or qkv, got {text!r}")
    return TARGETS[key]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="M",
                   help="model preset, a .json spec or a Hugging Face config.json")
    p.add_argument("--system", required=True, metavar="S", help="system preset or .json")
    p.add_argument("--gpus", type=positive_int, required=True, metavar="N", help="GPU count")
    p.add_argument("--stack", default=None, metavar="STACK",
                   help="training software stack (default: the newest preset)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_post_training(sub: Any) -> None:
    f = sub.add_parser("finetune", allow_abbrev=False,
                       help="fine-tuning (full SFT, LoRA, QLoRA): days, memory, cost, layout")
    _common(f)
    f.add_argument("--method", required=True, choices=METHODS)
    f.add_argument("--tokens", type=positive_number, required=True, metavar="T",
                   help=f"{TOKENS.doc}, e.g. 2e9")
    f.add_argument("--seq-len", type=positive_int, metavar="L",
                   help="sequence length in tokens (default: the model's)")
    f.add_argument("--global-batch", type=positive_int, default=128, metavar="B",
                   help="sequences per step (default: %(default)s)")
    f.add_argument("--lora-rank", type=positive_int, default=16, metavar="R",
                   help="adapter rank (default: %(default)s)")
    f.add_argument("--lora-targets", type=_targets, default="all", metavar="attn,mlp",
                   help="matmuls with adapters: attn, mlp, attn,mlp (default) or qkv (the "
                        "fused QKV matmul alone)")
    f.add_argument("--packing", choices=PACKING, default="packed",
                   help="packed sequences (default) or one example per padded sequence")
    f.add_argument("--mean-example-tokens", type=positive_number, metavar="E",
                   help="with --packing padded: the mean example length in tokens")
    add_cost_args(f)
    f.set_defaults(run=run_finetune)

    r = sub.add_parser("rl", allow_abbrev=False,
                       help="RL post-training (GRPO/PPO): one step's generation, training, "
                            "sync and idle GPUs, colocated or split")
    _common(r)
    r.add_argument("--prompts-per-step", type=positive_int, required=True, metavar="P",
                   help=RL_FIELD["prompts"].doc)
    r.add_argument("--samples-per-prompt", type=positive_int, required=True, metavar="K",
                   help=RL_FIELD["samples"].doc)
    r.add_argument("--input-tokens", type=positive_int, required=True, metavar="I",
                   help=RL_FIELD["input_tokens"].doc)
    r.add_argument("--output-tokens", type=positive_int, required=True, metavar="O",
                   help=RL_FIELD["output_tokens"].doc)
    r.add_argument("--max-output-tokens", type=positive_int, metavar="O_MAX",
                   help=f"{RL_FIELD['max_output_tokens'].doc} (default: the mean: every "
                        "answer equal)")
    r.add_argument("--placement", required=True, choices=PLACEMENTS,
                   help=RL_FIELD["placement"].doc)
    r.add_argument("--generation-gpus", type=positive_int, metavar="G",
                   help="with --placement split: GPUs that generate (default: searched)")
    r.add_argument("--algorithm", choices=ALGORITHMS, default=RL_FIELD["algorithm"].default,
                   help=RL_FIELD["algorithm"].doc)
    r.add_argument("--off-policy", action="store_true", help=RL_FIELD["off_policy"].doc)
    r.add_argument("--precision", choices=RL_FIELD["precision"].choices,
                   default=RL_FIELD["precision"].default,
                   help=f"{RL_FIELD['precision'].doc} (default: %(default)s)")
    r.add_argument("--steps", type=positive_int, default=RL_STEPS.default, metavar="S",
                   help=f"{RL_STEPS.doc} (default: %(default)s)")
    add_cost_args(r)
    r.set_defaults(run=run_rl)


def run_finetune(args: argparse.Namespace) -> int:
    if args.packing == "padded" and args.mean_example_tokens is None:
        raise CliError("--packing padded needs --mean-example-tokens E (the mean example "
                       "length)")
    if args.packing == "packed" and args.mean_example_tokens is not None:
        raise CliError("--mean-example-tokens is for --packing padded")
    model = load_model(args.model, seq_len=args.seq_len)
    system = load_system(args.system)
    ft = FineTune(args.method, args.tokens, args.lora_rank, args.lora_targets, args.packing,
                  args.mean_example_tokens)
    request = Request.build(model, system, global_batch=args.global_batch, gpus=args.gpus,
                            strategy="1d", stack=args.stack, costs=costs_from_args(args))
    out = finetune(request, ft).summary()
    from model.validation.finetune import accuracy  # the validation runs only when answered

    out["accuracy"] = accuracy(args.method, args.stack)
    if args.json:
        print_json({"model": model.name, "system": system.name, "seq_len": model.seq_len,
                    "global_batch": args.global_batch, "tokens": args.tokens, **out})
        return 0
    lay = out["layout"]
    print(f"{model.name} fine-tuned by {args.method} on {args.gpus} × {system.name}, "
          f"{args.tokens:,.0f} tokens, sequences of {model.seq_len:,} ({args.packing})")
    cost = ("cost unknown (the system has no price: give --usd-per-gpu-hour)"
            if out["cost_usd"] is None else f"cost ${out['cost_usd']:,.0f}")
    print(f"  {out['days']:.3g} days, {out['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, "
          f"{cost}")
    print(f"  trainable parameters {out['trainable_params']:,.0f}")
    print(f"  accuracy: {out['accuracy']}")
    parts = ", ".join(f"{k} {v:.2f}" for k, v in out["memory_breakdown_gb"].items())
    print(f"  memory {out['memory_gb']:.2f} GB per GPU = {parts}")
    print(f"  layout: tp {lay['tp1']} · pp {lay['pp']} · dp {lay['dp']}, microbatch "
          f"{lay['microbatch']}, ZeRO {out['zero']}, recompute {out['recompute']}")
    return 0


# the flag of each RL field, so a refusal names what the user typed
RL_FLAGS = {"prompts": "--prompts-per-step", "samples": "--samples-per-prompt",
            "input_tokens": "--input-tokens", "output_tokens": "--output-tokens",
            "max_output_tokens": "--max-output-tokens", "steps": "--steps"}


def _rl_step(args: argparse.Namespace) -> RlStep:
    """The RL step the flags ask for, checked against its fields; a refusal names the flag."""
    try:
        check_field("RL run", RL_STEPS, args.steps)
        return RlStep(args.prompts_per_step, args.samples_per_prompt, args.input_tokens,
                      args.output_tokens, args.max_output_tokens or args.output_tokens,
                      args.placement, args.algorithm, args.off_policy, args.precision)
    except ModelError as exc:
        text = str(exc)
        for name, flag in RL_FLAGS.items():
            text = text.replace(f"'{name}'", flag)
        raise CliError(text) from exc


def run_rl(args: argparse.Namespace) -> int:
    if args.generation_gpus is not None and args.placement != "split":
        raise CliError("--generation-gpus is for --placement split")
    if args.off_policy and args.placement != "split":
        raise CliError("--off-policy is for --placement split (colocated GPUs alternate)")
    step = _rl_step(args)
    model = load_model(args.model)
    system = load_system(args.system).with_costs(costs_from_args(args))
    res = rl_step(model, system, args.gpus, step, stack=args.stack,
                  generation_gpus=args.generation_gpus)
    from model.validation.rl import accuracy  # the validation runs only when answered

    out = {**res.summary(), "steps": args.steps,
           "accuracy": accuracy(system.generation, args.placement, args.off_policy,
                                args.algorithm, args.precision, args.stack)}
    out["run_days"] = args.steps * out["step_s"] / 86400.0
    per_step = out["cost_per_step_usd"]
    out["run_cost_usd"] = None if per_step is None else args.steps * per_step
    if args.json:
        print_json({"model": model.name, "system": system.name, **out})
        return 0
    print(f"{model.name} {args.algorithm.upper()} on {args.gpus} × {system.name}, "
          f"{args.placement}: {args.prompts_per_step} prompts × {args.samples_per_prompt} "
          f"samples, {args.input_tokens:,} + {args.output_tokens:,} tokens")
    print(f"  step {out['step_s']:.4g} s = generation {out['generation_s']:.4g} "
          f"(tail {out['tail_s']:.3g}), reference/reward {out['reference_s']:.3g}, "
          f"training {out['training_s']:.4g}, sync {out['sync_s']:.3g}, "
          f"offload {out['offload_s']:.3g}")
    cost = ("cost unknown (the system has no price: give --usd-per-gpu-hour)"
            if per_step is None else
            f"cost ${per_step:,.2f} per step, ${out['run_cost_usd']:,.0f} in all")
    print(f"  {args.steps:,} steps: {out['run_days']:.3g} days; {cost}")
    print(f"  accuracy: {out['accuracy']}")
    print(f"  idle GPU share {out['idle_gpu_share']:.1%}; generation on "
          f"{out['generation_gpus']} GPUs, training on {out['training_gpus']}")
    g, t = out["generation_layout"], out["training_layout"]
    print(f"  generation layout: tp {g['tp']} · pp {g['pp']} · {g['replicas']} replica(s), "
          f"batch {g['batch']:g}; training layout: tp {t['tp1']} · pp {t['pp']} · dp {t['dp']}")
    return 0


def _scored(args: argparse.Namespace, validation: Any) -> tuple[Any, dict] | None:
    """A validation set's records and summary (``validation``: a module with ``records()`` and
    ``summary(frame)``); None once they are printed as one JSON object (``--json``)."""
    frame = validation.records()
    stats = validation.summary(frame)
    if args.json:
        print_json({"records": frame.to_dict("records"), "summary": stats})
        return None
    return frame, stats


def run_validate_finetune(args: argparse.Namespace) -> int:
    """Predicted vs measured tokens/s per GPU on Megatron-Bridge's SFT and LoRA runs
    (:mod:`model.validation.finetune`; nothing fitted to them)."""
    from model.validation import finetune as ftv

    scored = _scored(args, ftv)
    if scored is None:
        return 0
    frame, stats = scored
    print(frame.to_string(index=False, float_format="%.1f"))
    print(f"\nerror % = 100·(predicted/measured − 1); fitted: {stats['fitted']}; "
          f"{stats['source']}")
    for key in ("all", "full", "lora"):
        row = stats[key]
        print(f"{key}: mean |error| {row['mean_abs_error_pct']:.1f} %, max "
              f"{row['max_abs_error_pct']:.1f} % over {row['runs']} runs")
    return 0


def run_validate_rl(args: argparse.Namespace) -> int:
    """Predicted vs measured step time on NeMo-RL's published GRPO runs
    (:mod:`model.validation.rl`; nothing fitted to them)."""
    from model.validation import rl as rlv

    scored = _scored(args, rlv)
    if scored is None:
        return 0
    frame, stats = scored
    cols = ["id", "gpus", "generation_gpus", "measured_step_s", "predicted_step_s",
            "error_pct", *rlv.PHASES]
    print(frame[cols].to_string(index=False, float_format="%.1f"))
    print(f"\nerror % = 100·(predicted/measured − 1) of the step time; the phases are "
          f"predicted (the source publishes step times only); fitted: {stats['fitted']} "
          f"(out-of-sample); {stats['source']}")
    for name, row in [("all", stats["all"]), *stats["populations"].items()]:
        print(f"{name}: mean |error| {row['mean_abs_error_pct']:.1f} %, max "
              f"{row['max_abs_error_pct']:.1f} %, mean error {row['mean_error_pct']:+.1f} % "
              f"over {row['runs']} runs")
    return 0
