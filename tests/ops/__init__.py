"""Tests of pipeline/ops/."""
