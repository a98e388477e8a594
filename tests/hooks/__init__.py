"""Tests of pipeline/hooks/."""
