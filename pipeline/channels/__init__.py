"""Candidate channels' array code: dense (FAISS, blocked scan), lexical (BM25) and their union.

The ``channels`` stage (``pipeline.stages.channels``) holds the parameters; everything here takes
arrays and parameter objects and reads no config.
"""
