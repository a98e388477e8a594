"""Tests of pipeline/core/."""
