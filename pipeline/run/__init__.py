"""A run: the runner, the query path, packs, executors, outputs, the recall cache's precompute and keys, preset=auto, feedback, tuning."""
