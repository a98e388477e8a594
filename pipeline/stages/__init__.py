"""Pipeline stages: one module per stage (and a few helpers that serve one stage only); array code
that several stages share lives in ``pipeline.ops``, the candidate channels' in ``pipeline.channels``."""
