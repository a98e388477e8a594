"""Tests of pipeline/metrics/."""
