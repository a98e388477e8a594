"""Adapters turn real sources into the data contract (``pipeline.contract.dataset.Dataset``).

Each module exposes ``load(path, *, name, ...) -> Dataset``; ``conf/data/*.yaml`` selects one with
``_target_``. Every adapter validates its input and names the file, row and field of a problem.
"""
