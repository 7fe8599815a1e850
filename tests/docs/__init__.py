"""Tests of the documentation: README.md and docs/*.md (a package, so its modules' names do
not clash with other test folders')."""
