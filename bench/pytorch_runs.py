"""Turn the PyTorch-native benchmark tables into run records the validation reads.

Run: python bench/pytorch_runs.py   # writes model/data/reference/pytorch_runs.json

Inputs (copied into the package with their sources):

* ``reference/llm_foundry_a100.md``: llm-foundry's A100 80 GB and 40 GB tables (Composer +
  PyTorch FSDP1, MPT models). MPT dimensions from llm-foundry's ``scripts/train/yamls/pretrain/
  mpt-*.yaml``; each checked against the table's NumParams (12·L·e² + V·e + l·e).
  What the runs executed (``submit_benchmarks.py`` of the time, mosaicml/llm-foundry at
  12a631913c786ac70e33e42047d2eae6f443ee69: image ``mosaicml/pytorch:1.13.1``,
  ``--attn_impl triton``, ``low_precision_layernorm``, FSDP ``limit_all_gathers``;
  Composer's FSDP default ``backward_prefetch`` BACKWARD_POST): the Triton flash attention,
  eager element-wise kernels, FSDP1 FULL_SHARD, parameters gathered in FP32 under the DEFAULT
  mixed precision (Composer's ``prepare_fsdp_module`` of torch 1.13: ``param_dtype`` left
  FP32) and in BF16 under PURE; activation checkpointing: full recompute.
* ``reference/torchtitan_llama3_h100_202412.md``: torchtitan's Llama 3.1 8B/70B/405B H100
  tables (FSDP2, SDPA's flash backend = FlashAttention-2 in torch of 2024-12-23, cuDNN attention
  opt-in since pytorch/pytorch#138522), on the ``h100-96gb-500w`` system. Selective "op"
  checkpointing is the ``op-sac`` recompute mode (every save-list op's output kept except every
  second matmul's: ``model/physics/op_sac.py``, torchtitan ``activation_checkpoint.py`` at
  cfb9326). The 405B pipeline runs do not state their
  microbatch count: marked uncertain (not fitted).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "model" / "data" / "reference"
OUT = REF / "pytorch_runs.json"

# MPT: (layers, hidden, heads) of llm-foundry's yamls; GELU MLP of 4·hidden, no biases, tied
# embeddings, learned position embeddings, LayerNorm, vocab 50368
MPT = {"125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 12),
       "1b": (24, 2048, 16), "3b": (32, 2560, 20), "7b": (32, 4096, 32),
       "13b": (40, 5120, 40), "30b": (48, 7168, 56), "70b": (80, 8192, 64)}
MPT_VOCAB = 50368
LLAMA = {"8B": (32, 4096, 32, 8, 14336), "70B": (80, 8192, 64, 8, 28672),
         "405B": (126, 16384, 128, 8, 53248)}
FOUNDRY_SOURCE = ("mosaicml/llm-foundry scripts/train/benchmarking/README.md at "
                  "061f2c7ce64e655100286584a7629e2a09f827ba, {table}")
TITAN_SOURCE = ("pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md at "
                "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, {table}")


def _mpt(name: str, seq: int) -> dict:
    layers, hidden, heads = MPT[name]
    return {"name": f"MPT-{name}", "layers": layers, "hidden": hidden, "heads": heads,
            "ffn": 4 * hidden, "seq_len": seq, "vocab": MPT_VOCAB, "mlp": "gelu",
            "bias": False, "dropout": False, "tied_embeddings": True,
            "position_embedding": "learned", "norm": "layernorm"}


def _llama(size: str, seq: int) -> dict:
    layers, hidden, heads, kv, ffn = LLAMA[size]
    return {"name": f"Llama 3.1 {size}", "layers": layers, "hidden": hidden, "heads": heads,
            "kv_heads": kv, "ffn": ffn, "seq_len": seq, "vocab": 128256, "mlp": "swiglu",
            "bias": False, "dropout": False, "tied_embeddings": False,
            "position_embedding": "rope", "norm": "rmsnorm"}


def _table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.strip().startswith("|")]


def foundry_records() -> list[dict]:
    """One record per row of llm-foundry's A100 tables."""
    text = (REF / "llm_foundry_a100.md").read_text()
    out, full_head = [], None
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        gb = "80gb" if part.startswith("A100 80GB") else "40gb"
        rows = _table_rows(part)
        head, body = rows[0], rows[2:]
        full_head = full_head or head
        if len(body[0]) == len(full_head) != len(head):  # the 40 GB header omits 'Model TFLOP'
            head = full_head  # while its rows carry it: read them with the 80 GB header
        col = {name: i for i, name in enumerate(head)}
        for n, r in enumerate(body):
            name, seq, gpus = r[col["Model"]], int(r[col["SeqLen (T)"]]), int(r[col["# GPUs"]])
            mb, gbs = int(r[col["MicroBatchSize"]]), int(r[col["GlobalBatchSize"]])
            pure = r[col["MP Mode"]] == "PURE"
            ckpt = r[col["Activation Checkpointing"]] == "True"
            out.append({
                "id": f"llmfoundry-a100-{gb}-{name}-s{seq}-g{gpus}-b{gbs}-{n}",
                "source": FOUNDRY_SOURCE.format(table=f"A100 {gb.upper()} table"),
                "model": _mpt(name, seq),
                "system": {"gpu": f"A100-SXM4-{gb.upper()}", "n_gpus": gpus},
                "parallel": {"tp": 1, "pp": 1, "global_batch": gbs, "microbatch": mb,
                             "fsdp": True, "precision": "bf16",
                             "recompute": "full" if ckpt else "none"},
                "execution": {"attention_kernel": "triton",
                              "fsdp_gather_dtype": "bf16" if pure else "fp32"},
                "measured": {"tokens_per_s_per_gpu": float(r[col["Throughput (T/s/GPU)"]])}})
    return out


def _titan(rid: str, table: str, size: str, seq: int, gpus: int, gbs: int, mb: int, tp: int,
           cp: int, pp: int, tps: float, execution: dict, uncertain: bool = False) -> dict:
    return {"id": rid, "source": TITAN_SOURCE.format(table=table), "model": _llama(size, seq),
            "system": {"gpu": "H100 96GB HBM2e 500W", "n_gpus": gpus},
            "parallel": {"tp": tp, "pp": pp, "cp": cp, "global_batch": gbs, "microbatch": mb,
                         "fsdp": True, "precision": execution.pop("precision", "bf16"),
                         "recompute": execution.pop("recompute", "full")},
            "execution": execution, "measured": {"tokens_per_s_per_gpu": tps},
            "uncertain": uncertain}


def titan_records() -> list[dict]:
    """torchtitan's Llama 3.1 runs (Tables 1–6)."""
    sac = {"recompute": "op-sac", "recompute_layers": 0}  # TorchTitan's per-op policy
    out = []
    for table, gpus, gbs, tps in (("Table 1", 8, 16, (5762, 6667, 8532)),
                                  ("Table 3", 128, 256, (5605, 6514, 8380))):
        for tech, value in zip(("fsdp", "compile", "float8"), tps):
            ex = {**sac, "elementwise": "eager" if tech == "fsdp" else "compile",
                  "precision": "fp8" if tech == "float8" else "bf16"}
            out.append(_titan(f"torchtitan2412-8b-{tech}-g{gpus}", table, "8B", 8192, gpus,
                              gbs, 2, 1, 1, 1, float(value), ex))
    for cp, seq, tps in ((1, 32768, 3890), (2, 65536, 2540), (4, 131072, 1071),
                         (8, 262144, 548)):
        out.append(_titan(f"torchtitan2412-8b-cp{cp}-s{seq}", "Table 2", "8B", seq, 8, 8 // cp,
                          1, 1, cp, 1, float(tps), {"precision": "fp8"}))
    for overlap, tps in ((False, 829), (True, 876)):
        out.append(_titan(f"torchtitan2412-70b-2d{'-asynctp' if overlap else ''}", "Table 4",
                          "70B", 8192, 256, 512, 16, 8, 1, 1, float(tps),
                          {"precision": "fp8", "tp_overlap": overlap}))
    for v, tps in ((1, 100), (2, 128)):  # microbatches per stage not stated: 8 assumed
        out.append(_titan(f"torchtitan2412-405b-3d-v{v}", "Table 5", "405B", 8192, 512, 256,
                          4, 8, 1, 8, float(tps), {"precision": "fp8", "interleave": v},
                          uncertain=True))
    return out


def main() -> None:
    records = foundry_records() + titan_records()
    OUT.write_text(json.dumps({
        "description": "PyTorch-native training runs (llm-foundry A100 tables, torchtitan Llama "
                       "3.1 H100 tables) as validation records; written by "
                       "bench/pytorch_runs.py from the two copied tables (their sources in each "
                       "record). 'execution' holds what the run executed beyond its stack's "
                       "defaults.",
        "records": records}, indent=1) + "\n")
    print(f"wrote {len(records)} records to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
