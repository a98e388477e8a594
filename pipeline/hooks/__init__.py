"""The three systems' own online hooks over the recall cache (``recall serve``):

- ``oks``: an OKS search backend (entry point ``oks_search_backend`` → ``recall``);
- ``hermes``: a Hermes Agent memory provider (``prefetch`` reads the cache, ``queue_prefetch``
  computes the next turn's entry in the background);
- ``reme``: ReMe's HTTP ``search`` and ``health_check`` actions as routes of the serve app;
- ``bme``: ST-BME ``extra.bme_recall`` v1 cards written into a copy of a SillyTavern chat file.

Each hook reads entries through ``source.Source`` (a cache read first, then a recaller). These
modules import only the standard library and ``pipeline.contract.errors`` at the top, so the OKS and Hermes
processes that load them need nothing of the batch engine unless they read a cache in process.
"""
