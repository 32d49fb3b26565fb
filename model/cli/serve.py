"""``python -m model serve``: the serving estimate of one layout, or the search of what is not
pinned (docs/serving.md, "Command line"). Bad input: one line ``error: ...``, exit 2; valid
input with no answer (nothing fits in memory, or the request rate saturates every layout): the
reason on stderr, exit 3 (docs/cli.md, "Exit codes")."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from model.cli.args import EXIT_NO_ANSWER, CliError, positive_int, print_json
from model.cli.numbers import count, share
from model.engine.request import Request
from model.errors import ModelError
from model.serving.inputs import check_draft, check_host_pool
from model.serving.serve import serve_request
from model.specs.hardware import load_system
from model.specs.models import load_model
from model.specs.serving import KV_PRECISIONS, MTP_DEPTH, WEIGHT_PRECISIONS, Serving
from model.specs.serving_stack import DEFAULT, list_serving_stacks
from model.specs.transformer import Transformer

# DeepSeek-V3 technical report (arXiv 2412.19437) §5.4.3: the second token its MTP module
# predicts is accepted 85-90 % of the time; the default when --mtp is given alone
DEFAULT_MTP_ACCEPTANCE = 0.85
KEYS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "tokens_per_s_per_user",
        "ttft_s", "ttft_p90_s", "ttft_p99_s", "tpot_s", "itl_s", "e2e_s", "batch",
        "requests_per_s", "kv_cache_gb",
        "memory_gb", "weights_gb", "fits", "meets_sla", "usd_per_million_output_tokens",
        "usd_per_million_input_tokens", "energy_j_per_output_token")


def _number(lo: float, hi: float, what: str):
    """An argparse type: a finite number in [lo, hi]."""
    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (lo <= value <= hi):
            raise argparse.ArgumentTypeError(f"expected {what} in [{lo:g}, {hi:g}], got "
                                             f"{text!r}")
        return value
    parse.__name__ = what
    return parse


def _below_one(text: str) -> float:
    """An argparse type: a share in [0, 1) (a prefix-cache hit share)."""
    value = _number(0.0, 1.0, "a share")(text)
    if value >= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text!r} (a prompt "
                                         "wholly in the cache still computes its last token)")
    return value


def add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", allow_abbrev=False,
                       help="serving: tokens/s, latency, memory and $ per million tokens")
    p.add_argument("--model", required=True, metavar="NAME|CONFIG.json")
    p.add_argument("--system", required=True, metavar="S")
    p.add_argument("--gpus", type=positive_int, required=True, metavar="N",
                   help="GPUs of the deployment (instances of tp·pp GPUs)")
    for flag, help_ in (("--tp", "tensor-parallel GPUs per instance"),
                        ("--pp", "pipeline stages per instance"),
                        ("--ep", "expert-parallel GPUs (divides tp)"),
                        ("--replicas", "aggregated instances"),
                        ("--prefill-instances", "disaggregated: prefill instances x"),
                        ("--decode-instances", "disaggregated: decode instances y"),
                        ("--batch", "largest batch per instance")):
        p.add_argument(flag, type=positive_int, help=help_ + " (default: searched)")
    p.add_argument("--attention-dp", action=argparse.BooleanOptionalAction, default=None,
                   help="attention data-parallel over the tp GPUs (MoE models): pinned on, or "
                        "off with --no-attention-dp (default: searched)")
    p.add_argument("--precision", required=True, choices=WEIGHT_PRECISIONS)
    p.add_argument("--kv-precision", choices=KV_PRECISIONS,
                   help="KV cache (default: fp8 with fp8/mxfp8/nvfp4 weights, else as weights)")
    p.add_argument("--input-tokens", type=positive_int, required=True, metavar="I")
    p.add_argument("--output-tokens", type=positive_int, required=True, metavar="O")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--offline", action="store_true", help="max throughput: all queued")
    mode.add_argument("--concurrency", type=positive_int, metavar="C", help="users")
    mode.add_argument("--request-rate", type=_number(1e-9, 1e9, "requests/s"), metavar="R",
                      help="Poisson arrivals, requests/s")
    p.add_argument("--mtp", type=int, default=0, metavar="K", help=MTP_DEPTH.doc,
                   choices=range(int(MTP_DEPTH.lo), int(MTP_DEPTH.hi) + 1))
    p.add_argument("--mtp-acceptance", type=_number(1e-6, 1.0, "an acceptance rate"),
                   metavar="A", help=f"acceptance of each drafted token (default "
                                     f"{DEFAULT_MTP_ACCEPTANCE}, DeepSeek-V3's)")
    p.add_argument("--draft-model", metavar="NAME",
                   help="a separate draft model preset for --mtp K on a model without an MTP "
                        "head (speculative decoding; default: the model's own MTP head)")
    p.add_argument("--prefix-hit", type=_below_one, default=0.0, metavar="H",
                   help="share of each prompt already in the KV cache, in [0, 1): a prefix "
                        "shared by the requests (prefix caching; default 0)")
    p.add_argument("--kv-offload-gb", type=_number(0.0, 1e5, "GB"), default=0.0, metavar="GB",
                   help="host memory per GPU given to the KV cache (offload; default 0), at "
                        "most the system's host memory per GPU")
    p.add_argument("--ttft-max", type=_number(1e-6, 1e6, "seconds"), metavar="S")
    p.add_argument("--tpot-max", type=_number(1e-7, 1e4, "seconds"), metavar="S")
    p.add_argument("--stack", "--engine", dest="stack", default=DEFAULT,
                   choices=list_serving_stacks(),
                   help="serving stack, engine and version (default: %(default)s, the one "
                        "validated; vllm-0.x and sglang-0.5 are not validated end to end)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_serve)


def _workload(args: argparse.Namespace) -> dict[str, Any]:
    mode = "offline" if args.offline else ("concurrency" if args.concurrency else
                                           "request-rate")
    if args.mtp_acceptance is not None and not args.mtp:
        raise CliError("--mtp-acceptance needs --mtp K")
    if args.draft_model is not None and not args.mtp:
        raise CliError("--draft-model needs --mtp K (the tokens it drafts per step)")
    return {"input_tokens": args.input_tokens, "output_tokens": args.output_tokens,
            "mode": mode, "concurrency": args.concurrency,
            "request_rate_per_s": args.request_rate, "weight_precision": args.precision,
            "kv_precision": args.kv_precision, "mtp_depth": args.mtp,
            "mtp_acceptance": (args.mtp_acceptance or DEFAULT_MTP_ACCEPTANCE) if args.mtp
            else 0.0, "draft_model": args.draft_model, "prefix_hit": args.prefix_hit,
            "kv_offload_gb": args.kv_offload_gb,
            "ttft_max_s": args.ttft_max, "tpot_max_s": args.tpot_max}


def _layout(args: argparse.Namespace) -> dict[str, Any]:
    return {"tp": args.tp, "pp": args.pp, "ep": args.ep, "attention_dp": args.attention_dp,
            "replicas": args.replicas, "prefill_instances": args.prefill_instances,
            "decode_instances": args.decode_instances, "max_batch": args.batch}


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities as null, whole floats of counts as they are."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


MAX_TOKENS = 100_000_000  # the largest sequence a model spec takes (its seq_len field)
NO_ANSWER = ("no layout fits in memory", "saturated")  # messages of serve() that answer nothing


def _check_tokens(args: argparse.Namespace) -> None:
    """The prompt and output in the user's words, before a model is built for them."""
    total = args.input_tokens + args.output_tokens
    if total > MAX_TOKENS:
        raise CliError(f"--input-tokens {args.input_tokens:,} + --output-tokens "
                       f"{args.output_tokens:,} = {total:,} tokens is beyond any model "
                       f"(at most {MAX_TOKENS:,})")


def _check_model(model: Transformer, args: argparse.Namespace, context: int | None) -> None:
    """Refuse what the model cannot serve: a sequence beyond its context window, MTP without
    an MTP head or a draft model, a draft model that is not a preset or has another
    vocabulary."""
    total = args.input_tokens + args.output_tokens
    if context and total > context:
        raise CliError(f"--input-tokens {args.input_tokens:,} + --output-tokens "
                       f"{args.output_tokens:,} = {total:,} tokens is beyond {model.name}'s "
                       f"context of {context:,} tokens")
    if args.mtp and not model.mtp_layers and args.draft_model is None:
        raise CliError(f"--mtp {args.mtp}: {model.name} has no MTP head (mtp_layers 0); give "
                       "a separate draft model with --draft-model NAME")
    if args.draft_model is not None:
        try:
            check_draft(model, args.draft_model)
        except ModelError as err:
            raise CliError(f"--draft-model {args.draft_model}: {err}") from None


def _check_system(system: Any, args: argparse.Namespace) -> None:
    """Refuse a host KV pool the system cannot give (:func:`check_host_pool`), naming the
    flag."""
    try:
        check_host_pool(system, args.kv_offload_gb or 0.0, "--kv-offload-gb")
    except ModelError as err:
        raise CliError(str(err)) from None


def run_serve(args: argparse.Namespace) -> int:
    _check_tokens(args)
    model = load_model(args.model, seq_len=args.input_tokens + args.output_tokens)
    _check_model(model, args, model.max_context_tokens)
    system = load_system(args.system)
    _check_system(system, args)
    request = Request(model, system, Serving(_workload(args), args.gpus, _layout(args)),
                      stack=args.stack)  # the one request, as training's commands build
    result = serve_request(request)
    best = {k: _clean(v) for k, v in result.best.items()}
    if args.json:
        front = result.pareto[["output_tokens_per_s_per_gpu", "tokens_per_s_per_user", "tp",
                               "pp", "ep", "attention_dp", "batch"]].head(200)
        print_json({**best, "message": result.message,
                    "decode_step_by_op_s": result.step_by_op_s,
                    "pareto_front": [{k: _clean(v.item() if hasattr(v, "item") else v)
                                      for k, v in row.items()}
                                     for row in front.to_dict("records")]})
        return _exit(result.message)
    print(f"{model.name} on {args.gpus} × {system.name}, {best['mode']}, "
          f"{best['weight_precision']} weights, {best['kv_precision']} KV, stack {best['stack']}"
          f" ({best['candidates']} layouts evaluated)")
    layout = (f"tp {best['tp']:.0f}, pp {best['pp']:.0f}, ep {best['ep']:.0f}"
              f"{', attention DP' if best['attention_dp'] else ''}, " + (
                  f"{best['prefill_instances']:.0f}P{best['decode_instances']:.0f}D"
                  if best['prefill_instances'] else count(best['replicas'], "replica")))
    each = "decode instance" if best['prefill_instances'] else "replica"
    print(f"layout: {layout}, batch {share(best['batch'], each)}")
    one_token = args.output_tokens == 1
    for key in KEYS:
        value = best.get(key)
        if one_token and key in ONE_TOKEN_NA:
            value = "n/a (one output token: TTFT only)"
        elif key.startswith("ttft_p") and value is None:
            value = "n/a (modelled for Poisson arrivals, --request-rate, only)"
        print(f"  {key:34s} {value if not isinstance(value, float) else f'{value:.4g}'}")
    for metric, bar in best.get("error_bars", {}).items():
        print(f"  error bar of {metric}: {bar}")
    if result.message:
        print(f"note: {result.message}")
    return _exit(result.message)


ONE_TOKEN_NA = ("tpot_s", "itl_s", "tokens_per_s_per_user")


def _exit(message: str) -> int:
    """0 when the estimate answers; :data:`EXIT_NO_ANSWER` with the reason on stderr when
    nothing fits in memory or the load saturates every layout."""
    if any(m in message for m in NO_ANSWER):
        print(f"no answer: {message}", file=sys.stderr)
        return EXIT_NO_ANSWER
    return 0
