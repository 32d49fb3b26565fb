"""Production rules: the layouts a production training stack runs, as data the search space
applies (:mod:`model.engine.rules`, :mod:`model.engine.space`) unless the user relaxes them
(``Execution.production_layout`` off: ``--no-production-layout``, the API's execution field,
the dashboard's "Production layouts" switch). Every headline, plan and export searches with
them by default; the paper mode reproduces its own (idealised) space and ignores them.

* **Tensor parallelism inside one NVLink domain** (:data:`TP_INSIDE_DOMAIN`): a tp1 group's
  GPUs sit in one NVLink/NVSwitch domain (nv_tp1 = tp1, so tp1 ≤ the domain). Megatron-Core
  orders its process groups tp-cp-ep-dp-pp with tensor parallelism fastest so that TP ranks are
  consecutive, and its user guide sets TP to at most the GPUs of a node: the per-layer
  all-reduces/reduce-scatters of TP do not survive the NICs (Narayanan et al. 2021, §3.3:
  "tensor model parallelism ... within a multi-GPU server"). Context parallelism (the context
  strategy's cp), data and pipeline parallelism may cross domains.
* **Whole nodes** (:data:`WHOLE_NODES`): a job of more GPUs than a node takes whole nodes
  (n a multiple of the node size; a smaller job a divisor of one node): schedulers allocate
  nodes, and a partly used node leaves its other GPUs idle behind the same NICs.
* **Pipeline stages split the layers as Megatron-Core allows**: every stage holds at least one
  layer and the fullest holds ⌈layers / pp⌉ — Megatron-Core's uneven first/last stages
  (``--decoder-first/last-pipeline-num-layers``) and custom per-stage layouts
  (``--pipeline-model-parallel-layout``, Megatron-LM MR 2795, "flexible asymmetric VPP") —
  and interleaved virtual stages divide a stage's layers. The space applies these always
  (:mod:`model.engine.rules`, ``pp`` and ``interleave``); the paper mode's equal stages are
  stricter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from model.specs.execution import Execution
from model.specs.modes import Mode

TP_INSIDE_DOMAIN = "tensor parallelism inside one NVLink domain"
WHOLE_NODES = "whole nodes"
RELAX = ("production rule; relax it with --no-production-layout (API: execution "
         "production_layout false; dashboard: Production layouts off)")


def production_node(execution: Execution, mode: Mode, node_gpus: int) -> int:
    """The node size the production rules apply with, or 0 when they do not (relaxed, or the
    paper mode). One int threads through the space: >0 means every rule of this module."""
    return int(node_gpus) if execution.production_layout and not mode.is_paper else 0


def whole_nodes(gpus: int, node: int) -> bool:
    """Whether ``gpus`` is a whole number of ``node``-GPU nodes, or a job inside one node whose
    size divides it (True when node is 0: no rule)."""
    if node <= 0 or gpus <= 0:
        return True
    return gpus % node == 0 or (gpus < node and node % gpus == 0)


def whole_node_mask(d: dict[str, Any], gpus: int, node: int) -> Any:
    """:func:`whole_nodes` as a rule's test (a scalar: it reads no dimension of ``d``)."""
    return np.bool_(whole_nodes(gpus, node))


def tp_inside(table: np.ndarray, tp1: np.ndarray) -> np.ndarray:
    """[runs, placements] mask of the placements (rows of ``table``: nv_tp1, nv_tp2, nv_dp,
    nv_pp) that keep each run's tp1 group inside one domain: nv_tp1 = tp1."""
    return table[None, :, 0] == np.asarray(tp1)[:, None]


def placement_problem(tp1: int | None, nvs: int, gpus: int, nv_tp1: int | None) -> str:
    """Why pinned values break :data:`TP_INSIDE_DOMAIN` (for error messages), or ''."""
    if tp1 is None or gpus <= nvs:
        return ""
    if tp1 > nvs:
        return (f"tp1={tp1} does not fit in an NVLink domain of {nvs} GPUs "
                f"({TP_INSIDE_DOMAIN}: a {RELAX})")
    if nv_tp1 is not None and nv_tp1 != tp1:
        return (f"nv_tp1={nv_tp1} splits the tp1={tp1} group over NVLink domains "
                f"({TP_INSIDE_DOMAIN}: a {RELAX})")
    return ""
