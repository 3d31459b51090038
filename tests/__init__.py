"""The test suite, a package mirroring mlmprep's; its shared helpers are imported as `tests.fakes`, `tests.conftest`."""
