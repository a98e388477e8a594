"""Retrieval metrics through trec_eval's C core (``evaluate``), read by the run, the reports and the
commands."""
