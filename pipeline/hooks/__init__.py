"""The three systems' own online hooks over the recall cache (``recall serve``):

- ``oks``: an OKS search backend (entry point ``oks_search_backend`` → ``recall``);
- ``hermes``: a Hermes Agent memory provider (``prefetch`` injects the turn's recall: a cache read,
  else ``recall serve``'s answer within ``prefetch_timeout``; ``queue_prefetch`` warms the service);
- ``reme``: ReMe's HTTP ``search``, ``health_check`` and ``auto_memory`` actions as routes of the
  serve app;
- ``bme``: ST-BME ``extra.bme_recall`` v1 cards written into a copy of a SillyTavern chat file.

Each hook reads entries through ``source.Source`` (a cache read first, then a recaller). ``oks``,
``hermes``, ``source`` and ``client`` import only the standard library and
``pipeline.contract.errors`` at the top (``pipeline/__init__.py`` loads nothing else), so the OKS
and Hermes processes that load them need nothing of the batch engine (a ``pip install --no-deps``)
unless they read a cache in process (``cache_dir``); ``tests/hooks/test_hooks_light.py`` checks it.
"""
