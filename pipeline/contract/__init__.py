"""The data and config contract: errors, atomic writes, the schema, datasets, ingest, the target registry, run directories."""
