"""What every layer shares: the device backend, common helpers, the stage interface and contexts, progress, the npz cache, the code version, thresholds."""
