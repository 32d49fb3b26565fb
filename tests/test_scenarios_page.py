"""The Scenarios page and the Design page's timeline and memory cards without a browser: the
saved-scenario list and its file (checked, size-limited), the compare and sensitivity
callbacks, the selected configuration's views, and the export of each new card."""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-scenarios-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

import app  # noqa: E402, F401 - registers the pages and their callbacks
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import saved  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.figures.scenarios import compare_figure, tornado_figure  # noqa: E402
from dashboard.figures.timeline import memory_parts_figure, timeline_figure  # noqa: E402
from dashboard.jobs import scenarios as scenario_jobs  # noqa: E402
from dashboard.pages import design  # noqa: E402
from dashboard.pages import scenarios as page  # noqa: E402
from dashboard.server.export import card_figure, render  # noqa: E402
from dashboard.views import selected  # noqa: E402
from model import ModelError, load_model, load_system  # noqa: E402
from model.studies.compare import compare_frame  # noqa: E402
from model.studies.sensitivity import sensitivity_frame  # noqa: E402

pytestmark = pytest.mark.usefixtures("tmp_cache")


def scenario(**over) -> dict:
    scn, errors = S.validate_scenario({**S.default_scenario(), **over})
    assert scn is not None, errors
    return scn


def b200() -> dict:
    return scenario(**PR.system_values("b200"))


def test_saved_list_saves_replaces_deletes_and_is_bounded() -> None:
    a, b = scenario(), b200()
    entries = saved.save(saved.save([], "H200 base", a), "B200", b)
    assert saved.names(entries) == ["H200 base", "B200"]
    entries = saved.save(entries, "H200 base", b)  # replaced in place
    assert saved.names(entries) == ["H200 base", "B200"]
    assert saved.find(entries, "H200 base")["system"] == "b200"
    assert saved.names(saved.delete(entries, "B200")) == ["H200 base"]
    full = []
    for i in range(saved.MAX_SAVED):
        full = saved.save(full, f"s{i}", a)
    with pytest.raises(ModelError, match="at most 20"):
        saved.save(full, "one more", a)
    for bad in ("", "   ", "x" * 61, "tab\there", saved.CURRENT, None, 3):
        with pytest.raises(ModelError):
            saved.save([], bad, a)


def test_store_from_the_browser_is_checked_again() -> None:
    """Entries that are not valid scenarios (edited local storage, an older schema) are left
    out, never computed from."""
    good = {"name": "ok", "scenario": scenario()}
    raw = [good, {"name": "bad", "scenario": {**scenario(), "layers": -4}}, "junk",
           {"name": "ok", "scenario": b200()}, {"name": 5, "scenario": scenario()}]
    entries = saved.entries(raw)
    assert saved.names(entries) == ["ok"] and entries[0]["scenario"]["system"] == "h200"
    assert saved.entries({"not": "a list"}) == []


def test_file_round_trip_single_scenario_and_refusals() -> None:
    entries = saved.save(saved.save([], "a", scenario()), "b", b200())
    text = saved.to_file(entries)
    assert saved.from_file(text.encode()) == entries
    # the panel's own download: one scenario, named after its file (never read from a path)
    one = saved.from_file(S.to_json(b200()).encode(), "../../etc/B200 run.json")
    assert saved.names(one) == ["B200 run"] and one[0]["scenario"]["system"] == "b200"
    with pytest.raises(ModelError, match="larger than 320 KB"):
        saved.from_file(b" " * (saved.MAX_FILE_BYTES + 1))
    with pytest.raises(ModelError, match="not valid JSON"):
        saved.from_file(b"{nope")
    broken = {"scenarios": [{"name": "x", "scenario": {**scenario(), "hbm_gb": "lots"}}]}
    with pytest.raises(ModelError, match="scenario 'x': hbm_gb"):
        saved.from_file(json.dumps(broken).encode())
    with pytest.raises(ModelError, match="at most 20"):
        saved.from_file(json.dumps({"scenarios": [entries[0]] * 21}).encode())


def test_upload_and_save_callbacks() -> None:
    text = saved.to_file(saved.save([], "B200", b200()))
    contents = "data:application/json;base64," + base64.b64encode(text.encode()).decode()
    entries, message = page.upload(contents, "scenarios.json", [])
    assert saved.names(entries) == ["B200"]
    assert message.children == "Added 1 scenario from scenarios.json."
    assert message.className == "ctl-ok"  # a confirmation, not in the errors' red
    bad = "data:application/json;base64," + base64.b64encode(b"[1, 2]").decode()
    kept, message = page.upload(bad, "x.json", entries)
    assert kept is page.no_update and message.startswith("Upload rejected")
    entries, message = page.save(1, "mine", scenario(), entries)
    assert saved.names(entries) == ["B200", "mine"]
    assert message.children.startswith("Saved 'mine'") and message.className == "ctl-ok"
    _, message = page.save(1, "", scenario(), entries)
    assert message == "give the scenario a name"
    loaded = page.load(1, "B200", entries)
    assert loaded[-1].children == "Loaded 'B200'." and loaded[-2]["system"] == "b200"


def test_compare_shows_both_headlines_and_their_deltas() -> None:
    entries = saved.save([], "B200", b200())
    rows, fig, layouts, note, context = page.update_compare(scenario(), saved.CURRENT, "B200",
                                                            entries)
    by = {r["metric"]: r for r in rows}
    days = by["train_days"]
    assert days["a"] > days["b"] > 0  # B200 trains faster than H200
    assert days["delta"] == pytest.approx(days["b"] - days["a"])
    assert days["delta_pct"] == pytest.approx(100 * (days["b"] / days["a"] - 1))
    assert by["gpus"]["a"] == by["gpus"]["b"] == 4096
    assert "current:" in layouts and "B200:" in layouts and note == ""
    assert context["names"] == ["current", "B200"]
    assert fig["data"][0]["x"][0] == pytest.approx(days["delta_pct"])
    same = page.update_compare(scenario(), saved.CURRENT, saved.CURRENT, [])
    assert all(abs(r["delta"]) < 1e-9 for r in same[0]) and "Save a scenario" in same[3]


def test_sensitivity_callback_ranks_the_inputs() -> None:
    fig, text, error, fraction = page.update_sensitivity(scenario(), 10)
    assert error == "" and fraction == 0.1
    low = next(t for t in fig["data"] if t["name"] == "input −10 %")
    assert low["y"][0] == "matrix peak FLOP/s (every precision)" and low["x"][0] > 5
    assert text.startswith("Matrix peak FLOP/s")
    refused = page.update_sensitivity(scenario(), 0)
    assert refused[0] is page.no_update and "above 0" in refused[2]


def test_selected_configuration_views_and_exports() -> None:
    scn = scenario()
    _, _, picked, _ = design.build_space(scn)
    rows = design.checked_rows(picked)
    timeline, memory, text, *contexts = design.update_selected_views(picked, scn)
    row = selected.selected_row(scn, rows[0])
    ends = [b + x for t in timeline.data for b, x in zip(t.base, t.x)]
    assert max(ends) == pytest.approx(row["iteration_time_s"])
    assert "bubble" in text and contexts == [rows, rows]
    bars = {t.name: t.x[0] for t in memory.data if t.y[0] == "HBM"}
    over = bars.pop("over capacity", 0.0)
    # the parts fill the capacity; a tight row (kept, marked) holds more, the excess its own bar
    held = row["memory_gb"] + scenario_jobs.reserve_gb(scn)
    assert sum(bars.values()) == pytest.approx(max(row["hbm_capacity_gb"], held))
    assert over == pytest.approx(max(0.0, held - row["hbm_capacity_gb"]), abs=1e-9)
    for name, context in (("design-timeline", rows), ("design-memory", rows),
                          ("scenarios-sensitivity", 0.1),
                          ("scenarios-compare", {"a": scn, "b": b200(), "names": ["a", "b"]})):
        csv, ext = render(card_figure(name, scn, context), "csv")
        assert ext == "csv" and csv.count("\r\n") > 3, name
    with pytest.raises(ModelError, match="select a configuration"):
        card_figure("design-timeline", scn, [])
    with pytest.raises(ModelError, match="invalid"):
        card_figure("scenarios-compare", scn, {"a": {"layers": -1}, "b": scn})


def test_new_figures_are_what_plotly_validation_gives_and_handle_empty_frames() -> None:
    """The builders skip plotly's property validation (dashboard/figures/maker.py): validating
    each again raises nothing and changes nothing; an unusable frame gives a message."""
    scn = scenario()
    _, _, picked, _ = design.build_space(scn)
    timeline, parts, row = selected.frames(scn, design.checked_rows(picked)[0])
    tornado = sensitivity_frame(load_model("llama3-8b"), load_system("h100"), 64, 256, "1d",
                                0.1, stack="none")
    built = [timeline_figure(timeline), memory_parts_figure(parts),
             compare_figure(compare_frame(row, row.to_dict() | {"train_days": 1.0})),
             tornado_figure(tornado, 0.1)]
    for presentation in (False, True):
        built.append(timeline_figure(timeline, presentation=presentation))
    for fig in built:
        as_json = json.loads(fig.to_json(), parse_constant=str)
        assert json.loads(go.Figure(fig.to_dict()).to_json(), parse_constant=str) == as_json
        assert fig.layout.xaxis.title.text
    for builder in (timeline_figure, memory_parts_figure, compare_figure):
        for frame in (None, pd.DataFrame({"foo": [1]})):
            fig = builder(frame)
            assert len(fig.data) == 0 and fig.layout.annotations[0].text
    assert len(tornado_figure(None, 0.1).data) == 0


def test_the_selected_configuration_says_whether_it_fits_with_the_memory_interval() -> None:
    """Issue 32: fits / tight ("may not fit: X ± Y GB of Z") / no, as the CLI says it."""
    from model.validation.memory_error import fit_status
    scn = scenario()
    _, _, picked, _ = design.build_space(scn)
    _, _, row = selected.frames(scn, design.checked_rows(picked)[0])
    usable = float(row["hbm_capacity_gb"]) - scenario_jobs.reserve_gb(scn)
    state, words = fit_status(float(row["memory_gb"]), usable)
    assert selected.memory_fit(scn, row) == f"Memory: {state} — {words}."
    assert state in ("fits", "tight")  # the table lists configurations that fit


def test_the_a_and_b_picks_survive_a_reload() -> None:
    """Issue 29: the picks were reset to 'current' on every reload; they are kept in this
    browser (a local store) and restored with the options, a deleted one as 'current'."""
    entries = saved.save(saved.save([], "B200", b200()), "mine", scenario())
    kept = page.remember_picks("B200", "mine")
    assert kept == ["B200", "mine"]
    out = page.options(entries, kept)
    assert out[3:] == ("B200", "mine")
    assert page.options(saved.delete(entries, "mine"), kept)[3:] == ("B200", saved.CURRENT)
    assert page.options(entries, None)[3:] == (saved.CURRENT, saved.CURRENT)
    assert page.options(entries, ["x" * 999, 7])[3:] == (saved.CURRENT, saved.CURRENT)
