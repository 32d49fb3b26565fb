"""Instructions of one dashboard callback, counted by valgrind's callgrind (prints nothing).

Wall time on a shared 2-core machine varies by tens of per cent from run to run; a count of
instructions does not. The measured calls run inside ``operator.call``, so that callgrind
collects only them (``--toggle-collect``); imports and warm-ups are not counted:

    valgrind --tool=callgrind --toggle-collect=_operator_call --callgrind-out-file=cg.out \\
        .venv/bin/python bench/callback_instructions.py whatif 4
    grep -E '^(summary|totals):' cg.out     # instructions of the 4 calls together

Cases (the scenarios of ``bench/callback_latency.py``, same set-up and warm-up):

* ``whatif``: collect + the scaling page's callback, a scenario never seen before, an empty
  results cache, the search cache warm (the "what-if uncached" case);
* ``scaling``: ``compute.scaling`` alone, the same way (the sweep and the results cache);
* ``cached``: collect + the scaling callback of the same scenario again (a cache read);
* ``design_cached``: the design page's callback of the same scenario again;
* ``validate``: ``validate_scenario`` of the default scenario again.

It imports ``bench/callback_latency.py`` of the tree it runs in, so the same command counts an
older checkout (``cd`` to it first).
"""

from __future__ import annotations

import operator
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, os.getcwd())

import callback_latency as cl  # noqa: E402 - its set-up: the app, a throw-away cache dir


def main(mode: str, n: int) -> None:
    from dashboard.pages import design, scaling  # noqa: F401 - the tree's own page modules
    base = cl.default_scenario()
    cl.fresh_cache("warmup")
    cl.what_if({**base, "hbm_gb": 1000.0}, base)
    design.update_space({**base, "hbm_gb": 1000.0})
    if mode in ("whatif", "scaling"):
        for i in range(n + 1):  # the first one unmeasured, as a warm-up
            cl.fresh_cache(f"u{i}")
            scn = cl.scenario_at(base, i)
            if mode == "scaling":
                scn = cl.collect_or_exit(scn, base)
            call = cl.what_if if mode == "whatif" else cl.compute.scaling
            args = (scn, base) if mode == "whatif" else (scn,)
            if i:
                operator.call(call, *args)
            else:
                call(*args)
        return
    if mode == "cached":
        cl.fresh_cache("cached")
        call, args = cl.what_if, (base, base)
    elif mode == "design_cached":
        cl.fresh_cache("design")
        call, args = design.update_space, (base,)
    elif mode == "validate":
        call, args = sys.modules[cl.default_scenario.__module__].validate_scenario, (base,)
    else:
        raise SystemExit(f"unknown case {mode!r}: whatif, scaling, cached, design_cached, "
                         "validate")
    call(*args)
    call(*args)
    for _ in range(n):
        operator.call(call, *args)


if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[2].isdigit() or int(sys.argv[2]) < 1:
        raise SystemExit("usage: callback_instructions.py CASE N (N >= 1)")
    try:
        main(sys.argv[1], int(sys.argv[2]))
    finally:
        if cl.compute.HANDLE.store is not None:
            cl.compute.HANDLE.store.close()
        shutil.rmtree(cl.WORK, ignore_errors=True)
