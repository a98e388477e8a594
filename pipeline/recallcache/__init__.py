"""The recall cache's on-disk format, below both the run that writes it and the service that
reads it: its keys (``keys``: text, query and scope keys, the namespace; ``recipe``: the recipe hash
and scope versions), its generations (``layout``), its partitions and key index (``partitions``)
and the in-process reader (``reader.RecallCache``)."""
