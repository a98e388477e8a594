"""ST-BME's own rules at the array level (knowledge gate, eligible anchors, lexical unit coverage,
scene reconstruction), as its JavaScript computes them; the stages and renderers that apply them import
them from here. Array primitives every system shares stay in ``pipeline.ops``."""
