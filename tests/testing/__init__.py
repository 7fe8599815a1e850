"""Tests of the conformance kit, ``sessiontree.testing`` (a package, so its modules do not
clash with other tests')."""
