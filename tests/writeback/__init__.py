"""Tests of pipeline/writeback/."""
