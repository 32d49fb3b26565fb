"""Fine-tuning predicted against Megatron-Bridge's published SFT and LoRA runs.

``model/data/reference/megatron_bridge_finetune.json`` holds the 26.06 release's Llama 3 70B
SFT and LoRA rows with what their recipes run (its ``source`` and ``recipes``). Each run is
evaluated in its published layout (tp, pp, virtual stages, global batch 32, micro-batch 1,
packed 4,096-token sequences) with the release's stack (``megatron-bridge-26.06``, fitted on
pre-training runs only) and the LoRA recipe's adapters (rank 16 on the fused QKV matmul).
Nothing is fitted to these rows: the in-sample and the leave-one-out errors are the same
number, the error of a model that never saw them.

The layouts put 20 virtual stages on 40 layers per stage: the recipes do not count the
embedding and the loss as pipeline layers (else 41 layers per stage would not split into 20),
so ``ends_count_as_layers`` is off for these runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from model.engine.request import Request
from model.engine.search import evaluate_request
from model.specs import memo
from model.specs.hardware import load_system
from model.specs.models import load_model

DATA = Path(__file__).resolve().parents[1] / "data" / "reference" / "megatron_bridge_finetune.json"
GLOBAL_BATCH = 32  # every row's GBS
SEQ_LEN = 4096
LORA = {"trainable": "lora", "lora_rank": 16, "lora_targets": "qkv"}


def reference() -> dict:
    """The published rows and their source."""
    return json.loads(DATA.read_text())


@memo.lru("fine-tuning validation", 1)
def records() -> pd.DataFrame:
    """One row per published run: measured and predicted tokens/s per GPU, the error
    100·(predicted/measured − 1) and the predicted memory per GPU."""
    data = reference()
    stack = f"megatron-bridge-{data['release']}"
    model = load_model("llama3-70b", seq_len=SEQ_LEN)
    rows = []
    for run in data["runs"]:
        execution = {"precision": run["precision"], "interleave": run["vp"],
                     "fp32_gradients": False, "sequence_parallel": True,
                     "ends_count_as_layers": False, **(LORA if run["method"] == "lora" else {})}
        dp = run["gpus"] // (run["tp"] * run["pp"] * run["cp"])
        pins = {"tp1": run["tp"], "tp2": run["cp"], "pp": run["pp"], "dp": dp, "microbatch": 1}
        ev = evaluate_request(Request.build(
            model, load_system(run["system"]), global_batch=GLOBAL_BATCH, gpus=run["gpus"],
            pins=pins, top_k=1, execution=execution, stack=stack))
        predicted = float(ev.row["tokens_per_s"]) / run["gpus"]
        measured = float(run["tokens_per_s_per_gpu"])
        rows.append({"method": run["method"], "system": run["system"], "gpus": run["gpus"],
                     "precision": run["precision"], "tp": run["tp"], "pp": run["pp"],
                     "vp": run["vp"], "measured_tokens_per_s_per_gpu": measured,
                     "predicted_tokens_per_s_per_gpu": predicted,
                     "error_pct": 100.0 * (predicted / measured - 1.0),
                     "memory_gb": float(ev.row["memory_gb"]), "fits": bool(ev.row["fits"])})
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> dict:
    """Mean and max |error| (%) per method and over all runs; nothing is fitted, so these are
    out-of-sample errors."""
    def stats(part: pd.DataFrame) -> dict:
        err = np.abs(part["error_pct"].to_numpy())
        return {"runs": int(len(part)), "mean_abs_error_pct": float(err.mean()),
                "max_abs_error_pct": float(err.max())}
    return {"source": reference()["source"], "fitted": "nothing (the pre-training stack)",
            "all": stats(frame),
            **{method: stats(part) for method, part in frame.groupby("method")}}


def accuracy(method: str, stack: str | None) -> str:
    """The error a fine-tuning answer's population showed on these runs, never fitted to them
    (full and LoRA on a Megatron-family stack), or "not validated" (QLoRA, other stacks)."""
    if method == "qlora" or (stack and not stack.startswith("megatron")):
        return "not validated"
    stats = summary(records())[method]
    return (f"{stats['mean_abs_error_pct']:.1f} % mean |error| (max "
            f"{stats['max_abs_error_pct']:.1f} %) on {stats['runs']} Megatron-Bridge "
            f"{reference()['release']} Llama 3 70B {method} runs, nothing fitted to them")
