"""The serving workload: the search over serving layouts, the modes and metrics of a layout
evaluated at once (its per-step physics: model/physics/serving_*.py)."""
