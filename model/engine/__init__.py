"""The search engine: the candidate space and its rules, evaluation and exact pruning, the
per-process frontier cache, the design map, counts and the result schema."""
