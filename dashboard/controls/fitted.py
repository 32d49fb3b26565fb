"""The user's fitted software stack in the session's scenario (issue 23, item 3; docs/stacks.md).

The Validation page fits a stack to the user's measured runs (:mod:`dashboard.views.runs_upload`)
and its "Apply to this session" puts the fit in the scenario under :data:`FITTED_KEY`; the
software stack control's value :data:`FITTED` selects it (the presets stay one choice away):

``{"stack": {…the object ``python -m model calibrate --out`` writes (Stack.to_dict)…},
"fit": {system: {"runs": n, "loo_mean_pct": x, "loo_max_pct": y, "loo_scores": [s, …]}}}``

``fit`` is what the fit measured per system it fitted: its runs there and the mean and largest
|leave-one-out error| (None with one run: nothing is left to predict it from). It is the fitted
stack's own error bar (:func:`fit_error_bar`), never a preset's.

Everything comes back from the browser (the store, a scenario file, a link), so it is checked
here each time: JSON only, at most :data:`MAX_FITTED_BYTES`, the stack through the estimator's
own :func:`~model.specs.stack.stack_from_dict` (types, known keys, efficiencies in their ranges),
a ``base`` only by preset name — never a path, never unpickled. A link carries it compressed
(zlib, base64url) when that stays within :data:`MAX_LINK_CHARS`; a longer one stays in the
scenario file only, and the stack control's note says so.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import zlib
from typing import Any

from dashboard.controls.control_table import BY_KEY as CONTROL
from model.errors import ModelError
from model.specs import memo
from model.specs.conformal import COVERAGE, score
from model.specs.hardware import list_systems
from model.specs.stack import Stack, list_stacks, load_stack, stack_from_dict
from model.validation.error_bars import ErrorBar
from model.validation.user_bars import scores_bar

FITTED = "fitted"  # the software stack control's value that selects the session's fitted stack
FITTED_KEY = "fitted_stack"  # the scenario's key (and the link's parameter) holding it
# a fitted stack's JSON (indented, as the scenario file writes it) is about 3 kB; refuse more
# than this, which leaves a scenario file with one within its 16 kB (MAX_SCENARIO_BYTES)
MAX_FITTED_BYTES = 8 * 1024
MAX_LINK_CHARS = 4000  # its compressed form in a link: about 1.3 kB for a preset's fit
MAX_FIT_RUNS = 200  # model.validation.user_runs.MAX_RUNS
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ -]{0,39}")
FIT_KEYS = ("runs", "loo_mean_pct", "loo_max_pct", "loo_scores")


def check_fitted(value: Any) -> tuple[dict[str, Any] | None, str]:
    """(the clean fitted-stack object, "") or (None, why it is refused, in the user's words).
    ``value``: None (no fitted stack), the object, or its compressed link form (a string)."""
    if value is None:
        return None, ""
    if isinstance(value, str):
        try:
            value = from_link(value)
        except ModelError as exc:
            return None, str(exc)
    if not isinstance(value, dict):
        return None, "the fitted stack must be a JSON object with 'stack' and 'fit'"
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False)
        size = len(json.dumps(value, indent=2))
    except (TypeError, ValueError, RecursionError):
        return None, "the fitted stack is not plain JSON (numbers, strings, lists, objects)"
    if size > MAX_FITTED_BYTES:
        return None, f"the fitted stack is larger than {MAX_FITTED_BYTES // 1024} kB"
    try:
        return json.loads(_clean_text(text)), ""
    except ModelError as exc:
        return None, str(exc).removeprefix("stack: ")


def fitted_checks(raw: dict[str, Any], clean: dict[str, Any]) -> dict[str, str]:
    """The session's fitted stack (kept in ``clean`` when valid; its errors shown at the stack
    control), which the stack control's FITTED needs."""
    fitted, message = check_fitted(raw.get(FITTED_KEY))
    if message:
        return {"stack": f"Your fitted stack is refused — {message}"}
    if fitted is not None:
        clean[FITTED_KEY] = fitted
    elif clean["stack"] == FITTED:
        return {"stack": "No fitted stack in this session: fit your runs on the Validation "
                         "page and apply it, or choose a preset"}
    return {}


@memo.lru("fitted stacks checked", 16)
def _clean_text(text: str) -> str:
    """The canonical JSON of a fitted-stack object (its stack complete: no ``base``)."""
    data = json.loads(text)
    unknown = sorted(set(data) - {"stack", "fit"})
    if unknown:
        raise ModelError(f"unknown key '{unknown[0]:.40}'; allowed: stack, fit")
    stack = _stack(data.get("stack"))
    return json.dumps({"stack": stack.to_dict(), "fit": _fit(data.get("fit") or {})},
                      sort_keys=True)


def _stack(data: Any) -> Stack:
    if not isinstance(data, dict):
        raise ModelError("'stack' must be the object 'python -m model calibrate --out' writes")
    if not isinstance(data.get("execution") or {}, dict):
        raise ModelError("'execution' must be an object of execution options")
    base = data.get("base")
    if base is not None and (not isinstance(base, str) or base not in list_stacks()):
        raise ModelError(f"'base' must name a stack preset ({', '.join(list_stacks())})")
    stack = stack_from_dict(data, load_stack(base) if base else None)
    if not _NAME.fullmatch(stack.name):
        raise ModelError("its name must be 1 to 40 letters, digits, spaces, '.', '_' or '-'")
    return stack


def _pct(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 <= value <= 1000):
        raise ModelError(f"{where} must be a percentage in [0, 1000] or null")
    return float(value)


def _fit(data: Any) -> dict[str, dict[str, Any]]:
    """The fit's per-system summary, checked (keys: the system presets of the runs)."""
    if not isinstance(data, dict):
        raise ModelError("'fit' must be an object keyed by system")
    allowed = list_systems()
    out: dict[str, dict[str, Any]] = {}
    for system, row in data.items():
        where = f"fit.{system!s:.40}"
        if system not in allowed:
            raise ModelError(f"'fit' has an unknown system '{system!s:.40}'")
        if not isinstance(row, dict) or set(row) - set(FIT_KEYS):
            raise ModelError(f"{where} must be an object with {', '.join(FIT_KEYS)}")
        runs = row.get("runs")
        if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_FIT_RUNS:
            raise ModelError(f"{where}.runs must be a whole number from 1 to {MAX_FIT_RUNS}")
        mean = _pct(row.get("loo_mean_pct"), f"{where}.loo_mean_pct")
        top = _pct(row.get("loo_max_pct"), f"{where}.loo_max_pct")
        if (mean is None) != (runs < 2) or (top is None) != (mean is None) or (
                mean is not None and top is not None and top < mean):
            raise ModelError(f"{where}: leave-one-out errors come with two runs or more, the "
                             "largest no smaller than the mean")
        out[system] = {"runs": runs, "loo_mean_pct": mean, "loo_max_pct": top,
                       "loo_scores": _scores(row.get("loo_scores"), runs, where)}
    return out


def _scores(value: Any, runs: int, where: str) -> list[float]:
    """The leave-one-out scores |ln(predicted/measured)| of a system's runs (absent in a
    session stored before they were kept: none, so no interval is stated)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > runs or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or not 0 <= v <= 10 for v in value):
        raise ModelError(f"{where}.loo_scores must be a list of at most {runs} numbers in "
                         "[0, 10]")
    return [float(v) for v in value]


@memo.lru("fitted stack records", 16)
def _record(text: str) -> Stack:
    return stack_from_dict(json.loads(text))


def fitted_record(fitted: dict[str, Any]) -> Stack:
    """The estimator's :class:`Stack` of a clean fitted-stack object."""
    return _record(json.dumps(fitted["stack"], sort_keys=True))


def fit_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ``fit`` part from the rows of :func:`model.validation.user_runs.calibrate_runs`:
    per system, its runs and the mean and largest |leave-one-out error| in %."""
    out: dict[str, dict[str, Any]] = {}
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == system]
        loo = [100 * abs(1 - r["leave_one_out_s"] / r["measured_s"]) for r in mine
               if math.isfinite(r["leave_one_out_s"])]
        scores = [round(score(r["leave_one_out_s"], r["measured_s"]), 6) for r in mine
                  if math.isfinite(r["leave_one_out_s"])]
        out[system] = {"runs": len(mine),
                       "loo_mean_pct": round(sum(loo) / len(loo), 3) if loo else None,
                       "loo_max_pct": round(max(loo), 3) if loo else None,
                       "loo_scores": scores}
    return out


def fit_error_bar(fitted: dict[str, Any], system: str,
                  coverage: float = COVERAGE) -> ErrorBar:
    """The fitted stack's own interval on ``system`` (a preset name): the split-conformal
    interval of its leave-one-out scores there (:func:`model.validation.user_bars.scores_bar`)."""
    name = fitted["stack"]["name"]
    row = fitted["fit"].get(system)  # a fit is keyed by the runs' system presets
    if row is None:
        return ErrorBar(math.nan, math.nan, 0, name, system=system, reason=(
            f"your fitted stack '{name}' has no run on {system} (there it keeps its base "
            "stack's efficiencies)"))
    if row["loo_mean_pct"] is None:
        return ErrorBar(math.nan, math.nan, row["runs"], name, system=system, reason=(
            f"your fitted stack '{name}' has one run on {system}; leave-one-out needs two"))
    return scores_bar(name, row.get("loo_scores"), system, coverage)


def stack_label(scn: dict[str, Any]) -> str:
    """The scenario's stack in words: a preset's name, or "fitted: <name>"."""
    if scn.get("stack") == FITTED and isinstance(scn.get(FITTED_KEY), dict):
        return f"fitted: {scn[FITTED_KEY]['stack']['name']}"
    return str(scn.get("stack"))


def to_link(fitted: dict[str, Any]) -> str | None:
    """The compressed link form of a clean fitted-stack object; None when it would be longer
    than :data:`MAX_LINK_CHARS` (the link then leaves it out)."""
    raw = json.dumps(fitted, sort_keys=True, separators=(",", ":")).encode()
    text = base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")
    return text if len(text) <= MAX_LINK_CHARS else None


def from_link(text: str) -> Any:
    """The object of a link's compressed form (bounded: at most :data:`MAX_FITTED_BYTES` are
    inflated); ModelError when it is damaged."""
    damaged = "the link's fitted stack is damaged (copy the whole link, or use the scenario file)"
    if len(text) > MAX_LINK_CHARS:
        raise ModelError(damaged)
    inflate = zlib.decompressobj()
    try:
        packed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        raw = inflate.decompress(packed, MAX_FITTED_BYTES + 1)
    except (binascii.Error, ValueError, zlib.error):
        raise ModelError(damaged) from None
    if len(raw) > MAX_FITTED_BYTES or inflate.unconsumed_tail:
        raise ModelError(f"the link's fitted stack is larger than {MAX_FITTED_BYTES // 1024} kB")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # incl. UnicodeDecodeError
        raise ModelError(damaged) from None


def stack_options(fitted: Any) -> list[dict[str, Any]]:
    """The software stack control's options: the presets, and "fitted: <name>" while the
    session holds a (clean) fitted stack."""
    options = CONTROL["stack"].options()
    clean, _ = check_fitted(fitted)
    if clean is not None:
        options.append({"label": f"fitted: {clean['stack']['name']}", "value": FITTED})
    return options


def stack_note(scn: dict[str, Any]) -> str:
    """The line under the stack control while the session holds a fitted stack: what it is,
    and whether the page's link carries it (else only the scenario file does)."""
    fitted = scn.get(FITTED_KEY)
    if not isinstance(fitted, dict):
        return ""
    name = fitted["stack"]["name"]
    runs = sum(row["runs"] for row in fitted["fit"].values())
    where = ", ".join(fitted["fit"]) or "no system"
    state = "in use" if scn.get("stack") == FITTED else f"choose 'fitted: {name}' to use it"
    shared = ("the page's link carries it" if to_link(fitted) else "too long for the page's "
              "link: download the scenario to keep or share it")
    return f"Your fitted stack '{name}' ({runs} runs on {where}): {state}; {shared}."
