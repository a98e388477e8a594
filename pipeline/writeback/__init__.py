"""Write-back per memory system (``recall feedback RUN --format <system>``): what a run recalled,
written back into that system's own store format as a new file (the input store is never touched)."""
