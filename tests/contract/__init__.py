"""Tests of pipeline/contract/."""
