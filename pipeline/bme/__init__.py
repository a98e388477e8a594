"""ST-BME's own rules at the array level (knowledge gate, eligible anchors, lexical unit coverage,
scene reconstruction), as its JavaScript computes them; the stages and renderers that apply them import
them from here. ``propagate`` is ST-BME's activation loop one query at a time, the baseline that
``pipeline.ops.pedsa`` batches. Array primitives every system shares stay in ``pipeline.ops``."""
