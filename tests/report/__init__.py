"""Tests of pipeline/report/."""
