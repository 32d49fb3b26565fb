"""Search speed with training priced through the kernel layer (``kernel_tables``) against the
same search without it, in one process (prints figures; not a test).

Run: python bench/kernel_tables_speed.py [--repeat 5]

Cases: Llama 3 70B on 1,024 H100 (1D, torchtitan-2025's stack) and GPT-3 175B on 1,024 A100
(1D, megatron-lm-2022's), each searched with ``kernel_tables`` off and on; best of ``--repeat``
runs after one warm-up, the search caches emptied before every run (bench/search_speed.py's
method).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from search_speed import best_time  # noqa: E402 - bench/ is the script's own folder

from model import load_model, load_system, search  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cases = [("llama3-70b", "h100", "torchtitan-2025"), ("gpt3-175b", "a100", "megatron-lm-2022")]
    print(f"{'case':45s} {'kernel_tables':>13s} {'candidates':>11s} {'wall_ms':>8s}")
    for model, system, stack in cases:
        m, s = load_model(model), load_system(system)
        for on in (False, True):
            def run(m=m, s=s, stack=stack, on=on) -> int:
                return search(m, s, 1024, 1024, "1d", stack=stack,
                              execution={"kernel_tables": on}).candidates
            wall, count = best_time(run, args.repeat)
            print(f"{model + ', 1024 ' + system + ', ' + stack:45s} {str(on):>13s} "
                  f"{count:11,d} {wall * 1e3:8.1f}")


if __name__ == "__main__":
    main()
