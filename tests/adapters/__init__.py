"""Tests of pipeline/adapters/."""
