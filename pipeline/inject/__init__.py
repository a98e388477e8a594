"""Injection text: what each system (ST-BME, ReMe, OKS) would hand its LLM for one query, rendered
from a run's recall rows (``formats.render`` dispatches on ``inject.format``)."""
