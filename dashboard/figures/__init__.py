"""Pure figure builders for the dashboard: a result DataFrame in, a plotly Figure out.

No Dash, no I/O, no model calls: the callers run the model and pass its frames
(``model.studies.sweep.best_frame``, ``model.best_per_cell``, ``model.evaluate(...).ops``).
Every builder takes ``presentation`` (fonts ×1.5) and returns :func:`empty_figure` with a message
instead of raising when there is nothing to plot. Colours and labels come from
:mod:`dashboard.figures.theme`; :func:`figure_table` gives the data behind any figure for CSV
export.
"""

from dashboard.figures.breakdown import memory_figure, time_breakdown_figure
from dashboard.figures.codesign import codesign_figure
from dashboard.figures.common import empty_figure, mark_not_validated
from dashboard.figures.compare import parse_system_label, systems_figure
from dashboard.figures.cross_validation import cross_validation_figure
from dashboard.figures.design import hbm_contour_figure, heatmap_figure
from dashboard.figures.ops import ops_breakdown_figure, roofline_figure
from dashboard.figures.plan import lost_node_figure, pareto_figure
from dashboard.figures.scaling import efficiency_figure, optimal_config_figure, training_time_figure
from dashboard.figures.table import figure_table
from dashboard.figures.validation import validation_error_figure, validation_scatter_figure

__all__ = [
    "codesign_figure", "cross_validation_figure", "efficiency_figure", "empty_figure",
    "figure_table", "hbm_contour_figure", "heatmap_figure", "lost_node_figure",
    "mark_not_validated", "memory_figure",
    "ops_breakdown_figure", "optimal_config_figure", "pareto_figure", "parse_system_label",
    "roofline_figure", "systems_figure", "time_breakdown_figure",
    "training_time_figure", "validation_error_figure", "validation_scatter_figure",
]
