"""The Validation page reports the intervals' coverage per population and the memory model's
error (issue 32): the rows are the model's tables, at the coverage the control picks."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.views import coverage_card
from model.validation.coverage import coverage_table
from model.validation.memory_error import stored_reserved_rows, stored_rows


@pytest.mark.parametrize("q", [0.5, 0.8, 0.95])
def test_the_coverage_rows_are_the_models_table(q):
    rows = coverage_card.coverage_rows(q)
    table = coverage_table(q)
    assert [r["population"] for r in rows] == list(table["population"])
    assert [r["n"] for r in rows] == list(table["n"])
    assert rows[-1]["empirical_pct"] == pytest.approx(100 * table.iloc[-1]["empirical_coverage"],
                                                      abs=0.01)
    assert all(r["coverage_pct"] == pytest.approx(100 * q) for r in rows)


def test_a_coverage_outside_the_range_is_a_message_not_a_traceback():
    rows, message = coverage_card.update_coverage(0.99)
    assert rows == [] and "coverage must be from 0.5 to 0.95" in message


def test_the_page_shows_both_cards_with_the_memory_rows():
    page = (Path(__file__).resolve().parent.parent / "dashboard/pages/validation.py").read_text()
    assert "coverage_card.card()," in page and "coverage_card.memory_card()," in page
    assert "validation-coverage-table" in str(coverage_card.card())
    assert "validation-memory-table" in str(coverage_card.memory_card())
    rows = coverage_card.memory_rows()
    assert len(rows) == len(stored_rows()) + len(stored_reserved_rows())
