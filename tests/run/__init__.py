"""Tests of pipeline/run/."""
