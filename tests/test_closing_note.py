"""Issue 32's closing-note table (model/validation/closing_note.py): one row per population of
the coverage table, with its n, the stated and empirical coverage, the width and the memory
model's error where its runs have memory figures."""

from __future__ import annotations

from model.validation import closing_note, memory_error
from model.validation.coverage import coverage_table


def test_the_closing_table_has_every_population_and_its_figures(capsys):
    assert closing_note.main(["--coverage", "0.8"]) == 0
    text = capsys.readouterr().out
    out = text.split("\n\n")[0].splitlines()  # the training table; serving's follows
    table = coverage_table(0.8)
    assert len(out) == 2 + len(table)
    for line, row in zip(out[2:], table.to_dict("records"), strict=True):
        assert line.startswith(f"| {row['population']} | {row['n']} ({row['sources']}) | 80 % |")
    mem = [x for x in out if x.startswith("| megatron-family dense training on ampere GPUs")]
    errs = [100 * abs(r["predicted_gib"] / r["measured_gib"] - 1)
            for r in memory_error.stored_rows()]
    assert f"max {max(errs):.2f} %" in mem[0]
    hopper = [x for x in out if x.startswith("| pytorch-family dense training on hopper GPUs")]
    assert "| – (0) |" in hopper[0] and "peak reserved" in hopper[0]


def test_the_serving_table_has_a_row_per_serving_population():
    from model.validation.serving_residuals import serving_coverage
    table = serving_coverage(0.8)
    lines = closing_note.serving_table(0.8).splitlines()
    assert len(lines) == (2 + len(table) if len(table) else 0)
    for line, row in zip(lines[2:], table.to_dict("records"), strict=True):
        assert line.startswith(f"| {row['population']} | {row['n']} ({row['models']}) | 80 % |")
