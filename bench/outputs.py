"""Output regression: save the ``--json`` output of a fixed comparison set of ``tperf`` commands
(dense and MoE training, a PyTorch stack, the paper mode, a plan, serving) to a folder, or
compare two such folders. A refactor that must not change any number runs it before and after:

    PYTHONPATH=$PWD .venv/bin/python bench/outputs.py save /tmp/house_before
    PYTHONPATH=$PWD .venv/bin/python bench/outputs.py save /tmp/house_after
    PYTHONPATH=$PWD .venv/bin/python bench/outputs.py diff /tmp/house_before /tmp/house_after

Wall-clock fields (``elapsed_s`` and the like) are dropped before saving; every other value is
compared exactly (the JSON text, so floats bit for bit).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TPERF = [sys.executable, "-m", "model"]
CASES: dict[str, list[str]] = {
    "search_dense_1d": ["search", "--model", "gpt3-175b", "--system", "h100", "--gpus", "512",
                        "--strategy", "1d", "--top", "5"],
    "search_dense_paper": ["search", "--model", "gpt3-1t", "--system", "a100", "--gpus", "1024",
                           "--strategy", "summa", "--mode", "paper", "--top", "5"],
    "search_moe": ["search", "--model", "mixtral-8x7b", "--system", "h100", "--gpus", "256",
                   "--strategy", "1d", "--top", "5"],
    "search_pytorch": ["search", "--model", "llama3-8b", "--system", "h100", "--gpus", "64",
                       "--strategy", "1d", "--stack", "pytorch-fsdp-2023", "--top", "5"],
    "search_torchtitan": ["search", "--model", "llama3-70b", "--system", "h100", "--gpus", "128",
                          "--strategy", "1d", "--stack", "torchtitan-2025", "--top", "5"],
    "search_lists": ["search", "--model", "llama3-8b", "--system", "h200", "--gpus", "64",
                     "--strategy", "1d", "--recompute", "all", "--zero", "1,3", "--top", "5"],
    "search_max_gpus": ["search", "--model", "llama3-8b", "--system", "h100", "--max-gpus", "96",
                        "--gpu-step", "32", "--strategy", "1d", "--top", "3"],
    "search_lora": ["search", "--model", "llama3-8b", "--system", "h100", "--gpus", "16",
                    "--strategy", "1d", "--trainable", "lora", "--lora-rank", "16", "--top", "3"],
    "search_zero3": ["search", "--model", "llama3-8b", "--system", "h100", "--gpus", "64",
                     "--strategy", "1d", "--zero", "3", "--dp-bucket-mb", "0,200", "--top", "5"],
    "evaluate_offload": ["evaluate", "--model", "llama3-70b", "--system", "h100", "--gpus", "64",
                         "--strategy", "1d", "--tp", "8", "--pp", "2", "--dp", "4",
                         "--microbatch", "1", "--offload", "weights", "--offload-layers", "4"],
    "evaluate_offload_opt": ["evaluate", "--model", "llama3-70b", "--system", "h100", "--gpus",
                             "64", "--strategy", "1d", "--tp", "8", "--pp", "2", "--dp", "4",
                             "--microbatch", "1", "--offload", "optimizer"],
    "search_dualpipe": ["search", "--model", "mixtral-8x7b", "--system", "h100", "--gpus", "128",
                        "--strategy", "1d", "--pipeline-schedule", "dualpipe", "--zero", "1,3",
                        "--top", "5"],
    "search_hsdp": ["search", "--model", "llama3-8b", "--system", "h100", "--gpus", "64",
                    "--strategy", "1d", "--stack", "pytorch-fsdp-2023", "--fsdp-version", "1,2",
                    "--fsdp-shard-group", "0,8", "--fsdp-prefetch", "all", "--top", "5"],
    "evaluate_dense": ["evaluate", "--model", "gpt3-175b", "--system", "h100", "--gpus", "512",
                       "--strategy", "1d", "--tp", "8", "--pp", "8", "--dp", "8",
                       "--microbatch", "1"],
    "evaluate_moe": ["evaluate", "--model", "mixtral-8x7b", "--system", "h100", "--gpus", "64",
                     "--strategy", "1d", "--tp", "2", "--pp", "4", "--dp", "8", "--ep", "4",
                     "--microbatch", "1"],
    "plan_days": ["plan", "--model", "llama3-70b", "--system", "h100", "--tokens", "2e11",
                  "--days", "30", "--strategy", "1d"],
    "plan_pytorch": ["plan", "--model", "llama3-8b", "--system", "h100", "--tokens", "1e11",
                     "--days", "10", "--stack", "pytorch-fsdp-2023"],
    "serve_dense": ["serve", "--model", "llama3-70b", "--system", "h100", "--gpus", "8",
                    "--precision", "fp8", "--input-tokens", "1024", "--output-tokens", "256",
                    "--concurrency", "32"],
    "serve_moe": ["serve", "--model", "deepseek-v3", "--system", "h200", "--gpus", "16",
                  "--precision", "fp8", "--input-tokens", "2048", "--output-tokens", "512",
                  "--offline", "--stack", "sglang-0.5"],
}
TIMING_KEYS = ("elapsed", "wall", "seconds_searched", "search_s")


def _scrub(value: Any) -> Any:
    """The value without wall-clock fields."""
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()
                if not any(t in k for t in TIMING_KEYS)}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def save(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        done = subprocess.run([*TPERF, *CASES[name], "--json"], capture_output=True, text=True,
                              timeout=600, check=False)
        text = done.stdout if done.returncode == 0 else f"exit {done.returncode}\n{done.stderr}"
        try:
            text = json.dumps(_scrub(json.loads(text)), indent=1, sort_keys=True)
        except ValueError:
            pass
        (folder / f"{name}.json").write_text(text)
        print(f"{name}: exit {done.returncode}, {len(text)} characters", flush=True)


def diff(before: Path, after: Path) -> int:
    changed = 0
    for old in sorted(before.glob("*.json")):
        new = after / old.name
        same = new.exists() and new.read_text() == old.read_text()
        changed += not same
        print(f"{old.stem}: {'identical' if same else 'DIFFERENT'}")
    return 1 if changed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("folder", type=Path)
    s.add_argument("--only", nargs="*", default=list(CASES), choices=list(CASES))
    d = sub.add_parser("diff")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "save":
        save(args.folder, args.only)
        return 0
    return diff(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
