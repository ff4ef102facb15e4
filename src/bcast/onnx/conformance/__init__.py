"""``bcast conformance``: grade ONNX runtimes against bcast on every broadcasting operator.

The modules, in the order the data flows: `catalog` (operators and shape tables), `values`
(seeded and edge values), `cases` (one-node models), `spec` (what the operator texts leave
undefined; the tolerance table), `expected` (bcast's answers), `runtimes` (built-in runtimes
and the plug-in entry point), `workers` (isolated worker processes), `verdicts`, `kit`
(the pipeline) and `report` (cards, clusters, repros, JSON). docs/conformance.md tells how
to use it.
"""
