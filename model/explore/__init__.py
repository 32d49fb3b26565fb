"""The search: the candidate space and its rules, evaluation of candidates at once, exact
pruning, the per-process frontier cache, sweeps, design maps and the result schema."""
