"""Tests of pipeline/serve/."""
