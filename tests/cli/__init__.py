"""Tests of pipeline/cli/."""
