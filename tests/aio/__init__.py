"""Tests of the async API (a package, so its modules do not clash with other tests')."""
