"""Tests of pipeline/synth/."""
