"""Tests of pipeline/encoders/."""
