"""The cost model: per-op counts, collectives, strategies, the block, pipeline and memory."""
