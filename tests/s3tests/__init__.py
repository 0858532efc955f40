"""ceph's s3-tests (a pytest suite by another project) run against the S3 endpoint: the
harness (:mod:`.harness`, ``scripts/s3-tests``), the plugin that picks its core groups and
records each case's outcome (:mod:`.plugin`), and the suite's short form."""
