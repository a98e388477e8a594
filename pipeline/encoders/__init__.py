"""Text encoders (MiniLM through sentence-transformers, the hashing stand-ins) and the
content-addressed embedding cache; the run-wide embed stage that calls them is ``pipeline.encoders.models``."""
