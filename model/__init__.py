"""Analytical performance model of transformer training on GPU clusters (numpy only, no UI).

Public API::

    from model import load_model, load_system, search, evaluate
    m, s = load_model("gpt3-1t"), load_system("h200")
    res = search(m, s, gpus=4096, global_batch=4096, strategy="summa")
    res.top            # DataFrame of the fastest configurations that fit, best first
    ev = evaluate(m, s, 4096, 4096, "1d", tp1=8, pp=64, dp=8, microbatch=1)
    ev.row, ev.ops     # the configuration's numbers and its per-op breakdown
    plan(m, s, 4096, days=30).summary()   # the fewest GPUs that train within 30 days
    serve(m, s, 8, ServingWorkload(1000, 1000, weight_precision="fp8"))  # serving (docs/serving.md)
    finetune(Request.build(m, s, global_batch=64, gpus=8), FineTune("lora", 2e9))  # post-training
    rl_step(m, s, 16, RlStep(64, 8, 512, 1024, 4096, "split"))  # docs/post_training.md

``mode="paper"`` reproduces arXiv 2410.00273's public code, bugs included
(docs/model.md §12); the default model fixes them and adds embedding, LM head and loss.
"""

from model.api import codesign, design_space, evaluate, plan, search, serve, sweep
from model.engine.design import best_per_cell
from model.engine.request import Request
from model.engine.search import Evaluation, SearchResult
from model.errors import ModelError
from model.physics.strategies import canonical_strategy
from model.serving.serve import ServeResult
from model.specs.hardware import SYSTEMS_DIR, System, list_systems, load_system, system_from_dict
from model.specs.models import load_model
from model.specs.serving import Serving, ServingLayout, ServingWorkload
from model.specs.transformer import (
    WORKLOADS_DIR,
    Transformer,
    list_models,
    transformer_from_dict,
)
from model.specs.workload import Search, Training
from model.studies.finetune import FineTune, FineTuneResult, finetune
from model.studies.plan import PlanResult
from model.studies.rl import RlResult, RlStep, rl_step

__version__ = "0.1.0"

__all__ = [
    "SYSTEMS_DIR", "WORKLOADS_DIR", "Evaluation", "FineTune", "FineTuneResult", "ModelError",
    "PlanResult", "RlResult", "RlStep", "SearchResult",
    "Request", "Search", "ServeResult", "Serving", "ServingLayout", "ServingWorkload", "System",
    "Training",
    "Transformer", "best_per_cell",
    "canonical_strategy", "codesign", "design_space", "evaluate", "finetune", "list_models",
    "list_systems", "rl_step",
    "load_model", "load_system", "plan", "search", "serve", "sweep", "system_from_dict",
    "transformer_from_dict", "__version__",
]
