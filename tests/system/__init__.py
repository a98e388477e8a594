"""Tests that span many packages: end to end, one answer across paths and devices, the house's architecture rules."""
