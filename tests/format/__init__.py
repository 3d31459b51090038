"""Tests of mlmprep.format: the manifest, writing, publishing, loading, the seed cache, the summary and HTML report."""
