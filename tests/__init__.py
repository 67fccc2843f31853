"""The test suite: a package, so its shared kits import by name (tests.sync.synckit) and mypy checks it."""
