"""The S3 backend (``s3://bucket[/prefix]``): the store, its botocore error mapping, its
doctor (:mod:`.doctor`) and its lifecycle configuration (:mod:`.lifecycle`)."""

from blobledger.stores.s3.store import S3Store, map_errors, translate

__all__ = ["S3Store", "map_errors", "translate"]
