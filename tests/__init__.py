"""The test suite, laid out like the package: tests/<package>/ holds the tests of pipeline/<package>/."""
