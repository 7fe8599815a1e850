"""The model: every value a session holds, immutable and equal by value.

* :mod:`sessiontree.model.messages`: content blocks, usage and cost, the messages;
* :mod:`sessiontree.model.entries`: the entries of the tree and the session header, and
  their JSON lines;
* :mod:`sessiontree.model.types`: what the API returns (context, tree nodes, stats,
  listings, load reports).

Their fields are declared once, in the engine's model table (``_core.MODEL``); the classes
here follow it (``tests/model/test_model_table.py``). Every public name is importable from
the package root: ``sessiontree.UserMessage``.
"""
