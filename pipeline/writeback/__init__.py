"""What each reference system writes back into its own store after recall (``recall feedback
RUN --format <system>``; the dispatch table is ``pipeline.cli.feedback.WRITERS``)."""
