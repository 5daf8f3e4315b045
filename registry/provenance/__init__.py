"""Build provenance (SPEC 6.2): a signed in-toto statement for every published version, its key,
and where it is served (the API, the signed index, the OCI referrers API). See `records`."""
