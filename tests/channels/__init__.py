"""Tests of pipeline/channels/."""
