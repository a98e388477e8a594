"""Tests of pipeline/bme/."""
