"""Tests of pipeline/inject/."""
