"""What the dashboard runs on the estimator: cached computations, request budgets, background jobs
and the studies they run."""
