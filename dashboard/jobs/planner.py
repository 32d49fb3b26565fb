"""What the Plan & cost page needs from the estimator, cached like every view
(:func:`dashboard.jobs.compute.cached_frame`: JSON on disk, keyed by the inputs that matter).

The answer is :func:`model.studies.plan.plan` for the scenario (exact: every multiple of the node
size up to the plan's largest count), the lost-node view is
:func:`model.studies.lost_node.lost_node_frame` of the planned job, and the Pareto figure's points
are :func:`model.studies.pareto.pareto_frame` over the scenario's system and a few priced
presets. Every search is bounded: counts by the ``plan_max_gpus`` control (at most the model's
:data:`~model.studies.plan.DEFAULT_MAX_GPUS`), the Pareto figure by :data:`PARETO_COUNTS` counts
per system, the lost-node view by the ``lost_nodes`` control, each search by the estimator's
candidate budget.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dashboard.controls.scenario import PLAN_KEYS, build_inputs, costs_of, execution_of, stack_of
from dashboard.jobs import budget, compute, plan_stages
from dashboard.jobs.plan_stages import Stage
from model import ModelError, load_system
from model.api import pareto_frame
from model.engine.counts import count_range
from model.engine.request import Request
from model.studies.lost_node import lost_node_counts, lost_node_view
from model.studies.plan import PlanResult, plan_execution, plan_strategies

PARETO_SYSTEMS = ("h100", "h200", "b200", "gb200-nvl72")  # presets with a rental price
PARETO_COUNTS = 128  # GPU counts per system in the Pareto figure (a bounded sample)
QUICK_S = 1.0  # estimated seconds of the coarse stage of a plan computed in the request
QUICK_WALL_S = 1.0  # wall seconds past which the request hands the rest to the job
TARGET_KEYS = ("plan_goal", "target_days", "budget_usd")  # what the plan is asked, not searched
NARROW = "lower the plan's largest GPU count, or choose a smaller model or batch"
META = ("gpu_step", "max_gpus", "counts_searched")  # columns every answer row carries


def payload(scn: dict[str, Any], *extra: Any) -> dict[str, Any]:
    """What decides the page's results: the estimator's inputs, the strategies, the plan and
    cost inputs, and ``extra`` (e.g. the planned job's GPU count)."""
    return {**compute.page_payload(scn, "strategy", *PLAN_KEYS), "extra": list(extra)}


def rows_payload(scn: dict[str, Any], *extra: Any) -> dict[str, Any]:
    """What decides the best row of a GPU count (and the Pareto figure's points, with
    ``plan_max_gpus`` in ``extra``): :func:`payload` without the targets and the lost nodes,
    so a new target reuses the searches of the counts already searched."""
    drop = {*TARGET_KEYS, "plan_max_gpus", "lost_nodes"}
    return {**{k: v for k, v in payload(scn).items() if k not in drop}, "extra": list(extra)}


def inputs(scn: dict[str, Any], whole_plan: bool = False) -> tuple[Any, Any, dict[str, Any]]:
    """(model, system, the keyword arguments of plan/lost_node_frame/pareto_frame). Raises
    ModelError in the paper mode, which models neither an execution nor a cost; without
    ``whole_plan`` (the lost-node and Pareto views, which run after the plan) also for one
    search at the largest count over the request's budgets. The plan itself
    (``whole_plan``) is sized chunk by chunk as it runs (:mod:`dashboard.jobs.plan_stages`)."""
    if scn["mode"] == "paper":
        raise ModelError("Plan & cost needs the default model mode (the paper mode models no "
                         "cost): set Model mode to default")
    model, system = build_inputs(scn)
    # the same strategies and execution as `tperf plan` (model.studies.plan): all = the
    # production strategies; the interleaving and recomputed layers searched
    strategy = plan_strategies(model, scn["strategy"])
    strategy = (strategy,) if isinstance(strategy, str) else strategy
    execution = plan_execution(execution_of(scn))
    if not whole_plan:
        budget.check_searches(f"A search at the plan's largest count "
                              f"({scn['plan_max_gpus']:,} GPUs)",
                              _sized(scn, model, system, [scn["plan_max_gpus"]], strategy,
                                     execution), NARROW)
    return model, system, {"strategy": strategy, "execution": execution,
                           "stack": stack_of(scn), "costs": costs_of(scn)}


def _sized(scn: dict[str, Any], model: Any, system: Any, counts: Any,
           strategy: tuple[str, ...], execution: dict[str, Any]) -> Request:
    """The plan's searches at ``counts``, as the budget sizes them."""
    return Request.build(model, system, global_batch=scn["global_batch"],
                         gpus=tuple(int(n) for n in counts), strategy=strategy,
                         execution=execution, stack=stack_of(scn))


def cached_outputs(kind: str, payload_: dict[str, Any]) -> list | None:
    """A page's cached outputs for ``payload_`` (:func:`dashboard.jobs.compute.cached_outputs`),
    or None when they are not cached (nothing is computed)."""
    def missing() -> tuple:
        raise LookupError
    try:
        return compute.cached_outputs(kind, payload_, missing)
    except LookupError:
        return None


def quick(scn: dict[str, Any]) -> bool:
    """Whether the scenario's plan is small enough to compute within the request, as the Scaling
    page computes its views: the coarse stage's candidates (:mod:`dashboard.jobs.plan_stages`,
    counted exactly) take at most :data:`QUICK_S` by :mod:`dashboard.jobs.budget`'s measured
    cost per candidate (a dense model: 0.6 million for gpt3-1t, about 0.3 s; a
    mixture-of-experts model: 4 to 25 million). Raises ModelError as :func:`inputs`."""
    model, system, kw = inputs(scn, whole_plan=True)
    request = Request.build(model, system, global_batch=scn["global_batch"],
                            max_gpus=scn["plan_max_gpus"], **kw)
    counts = count_range(scn["plan_max_gpus"], system.node_size)
    if len(counts) == 0:
        return True  # plan() says so at once
    counted, total = budget.counted(request), 0
    for n in plan_stages.coarse_counts(counts):  # the smallest first: stop once over
        total += int(plan_stages.sized(request, [n], counted)[1][0])
        if budget.SEARCH_S_PER_CANDIDATE * total > QUICK_S:
            return False
    return True


def targets(scn: dict[str, Any]) -> dict[str, float | None]:
    """plan's ``days`` and ``budget_usd`` for the scenario's goal."""
    goal = scn["plan_goal"]
    return {"days": scn["target_days"] if goal in ("days", "both") else None,
            "budget_usd": scn["budget_usd"] if goal in ("budget", "both") else None}


def answer_frame(res: PlanResult, note: str = "") -> pd.DataFrame:
    """The plan's rows by ``role``: ``answer`` (none when nothing in range meets the target),
    ``fewer`` (the best of one node fewer, when it has a configuration) and ``fastest`` (the
    fastest count searched); each with :data:`META`. No row at all: one ``none`` row."""
    rows, roles = [], []
    per = res.per_count
    if res.row is not None:
        rows.append(res.row)
        roles.append("answer")
        fewer = per[per["gpus"] == res.gpus - res.gpu_step]
        if len(fewer):
            rows.append(fewer.iloc[0])
            roles.append("fewer")
    if len(per):
        rows.append(per.loc[per["plan_days"].idxmin()])
        roles.append("fastest")
    frame = pd.DataFrame(rows).reset_index(drop=True) if rows else pd.DataFrame(index=[0])
    frame.insert(0, "role", roles or ["none"])
    return frame.assign(gpu_step=res.gpu_step, max_gpus=res.max_gpus,
                        counts_searched=res.counts_searched, note=note)


def answer(scn: dict[str, Any], stage: Stage | None = None) -> pd.DataFrame:
    """:func:`answer_frame` of the scenario's plan, :func:`model.studies.plan.plan`'s answer
    searched in budget-sized chunks, each cached (:mod:`dashboard.jobs.plan_stages`);
    ``stage(done, total, text)`` hears each chunk (not called on a cached answer). The best
    row of every count searched is cached too (:func:`plan_rows`), for the
    lost-node view."""
    def run() -> pd.DataFrame:
        model, system, kw = inputs(scn, whole_plan=True)
        request = Request.build(model, system, global_batch=scn["global_batch"],
                                max_gpus=scn["plan_max_gpus"], **kw)
        res, searched = plan_stages.staged_plan(
            request, **targets(scn), failures=scn["plan_failures"],
            frames=plan_stages.cached_frames("plan-chunk", rows_payload(scn)), stage=stage,
            sizes=plan_stages.cached_frames("plan-sizes", compute.page_payload(scn, "strategy")))
        compute.cached_frame("plan-rows", payload(scn), lambda: res.per_count)
        compute.cached_frame("plan-searched", payload(scn),
                             lambda: pd.DataFrame({"gpus": searched}, dtype="int64"))
        return answer_frame(res, res.budget_note(scn["global_batch"]))  # as tperf plan
    return compute.cached_frame("plan-answer", payload(scn), run)


def plan_rows(scn: dict[str, Any]) -> tuple[pd.DataFrame, set[int]]:
    """(the best row of every count the scenario's plan searched that has one, the counts it
    searched), both empty unless :func:`answer` cached them."""
    def none() -> pd.DataFrame:
        raise LookupError
    try:
        rows = compute.cached_frame("plan-rows", payload(scn), none)
        searched = compute.cached_frame("plan-searched", payload(scn), none)
    except LookupError:
        return pd.DataFrame(), set()
    return rows, {int(n) for n in searched["gpus"]}


def lost_nodes(scn: dict[str, Any], gpus: int) -> pd.DataFrame:
    """The lost-node view of a job of ``gpus`` GPUs: up to ``lost_nodes`` nodes lost (fewer
    when the job has fewer nodes left to lose), from the plan's own rows of the counts it
    searched and the other counts searched here in budget-sized chunks."""
    def run() -> pd.DataFrame:
        model, system, kw = inputs(scn, whole_plan=True)  # checks the mode
        lost = min(scn["lost_nodes"], gpus // system.node_size - 1)
        if lost < 1:
            return pd.DataFrame()
        # the plan's own strategies and execution (plan_execution), as the plan answered with
        request = Request.build(model, system, global_batch=scn["global_batch"], gpus=gpus,
                                **kw)
        counts = lost_node_counts(request, lost=lost)
        rows, searched = plan_rows(scn)
        planned = rows[rows["gpus"].isin(counts)] if len(rows) else rows
        more = plan_stages.search_all(request, [n for n in counts if n not in searched],
                                      plan_stages.cached_frames("plan-lost-chunk",
                                                                rows_payload(scn)))
        frame = pd.concat([f for f in (planned, more) if len(f)], ignore_index=True) \
            if len(planned) or len(more) else more
        frame = frame.drop(columns=[c for c in frame.columns if c.startswith("plan_")])
        if len(frame):
            frame = frame.sort_values("gpus", kind="stable").reset_index(drop=True)
        return lost_node_view(request, frame, lost=lost)
    return compute.cached_frame("plan-lost", rows_payload(scn, gpus, scn["lost_nodes"]), run)


def pareto_systems(scn: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the presets of :data:`PARETO_SYSTEMS` the Pareto figure compares with the scenario's
    system, those left out because their GPU cannot run the scenario's precision: the same
    format × generation check as the scenario's own system, ``System.precision_problem``)."""
    others = [name for name in PARETO_SYSTEMS if name != scn["system"]]
    left_out = [name for name in others if load_system(name).precision_problem(scn["precision"])]
    return [name for name in others if name not in left_out], left_out


def pareto(scn: dict[str, Any]) -> pd.DataFrame:
    """Days and cost of the best configuration of every sampled count, on the scenario's
    system (as the panel sets it) and the priced presets of :data:`PARETO_SYSTEMS` whose GPU
    runs the scenario's precision (:func:`pareto_systems`)."""
    def run() -> pd.DataFrame:
        model, system, kw = inputs(scn)
        request = Request.build(model, system, global_batch=scn["global_batch"],
                                max_gpus=scn["plan_max_gpus"], **kw)
        others = [load_system(name).with_costs(kw["costs"]) for name in pareto_systems(scn)[0]]
        return pareto_frame(request, [request.system, *others], max_counts=PARETO_COUNTS)
    return compute.cached_frame("plan-pareto", rows_payload(scn, scn["plan_max_gpus"]), run)
