"""Serving the recall cache: ``RecallCache`` (in-process lookups), ``Service`` (the stores, indexes
and model loaded once; misses computed by the batch's query path), ``pipeline.serve.app.build_app``
(the HTTP routes of ``recall serve``) and ``pipeline.recallcache.keys`` (the documented keys)."""

from __future__ import annotations

__all__ = ["RecallCache", "Service"]


def __getattr__(name: str):
    """``RecallCache`` and ``Service``, imported on first use (``pipeline.run.precompute`` imports
    ``pipeline.recallcache.keys`` without the service)."""
    if name == "RecallCache":
        from pipeline.recallcache.reader import RecallCache

        return RecallCache
    if name == "Service":
        from pipeline.serve.service import Service

        return Service
    raise AttributeError(name)
