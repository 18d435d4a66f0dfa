"""numpy only: the block pool, paged allocation and its contiguous baselines, the prefix cache."""
