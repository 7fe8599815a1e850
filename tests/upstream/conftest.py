"""tests/upstream holds no tests of ours: pytest plugins, lists and a runner
(``run.sh``) that run the agent frameworks' own tests against the adapters. Kept out of this
repository's test run (and its ``--doctest-modules``), where the plugins would be imported
as plain modules, and their frameworks may not be installed."""

collect_ignore_glob = ["*"]
