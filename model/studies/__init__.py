"""Questions built on the search engine: plan, lost node, Pareto, co-design, ablation, sweeps,
comparison, sensitivity and the timeline views."""
