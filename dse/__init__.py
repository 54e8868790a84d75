"""dse: design-space exploration of AI GPU clusters.

The engine (spec, space, search, cluster, store, pareto, report, cli) drives the analytical models in the
sibling package `objectives`. Data flows one way: spaces/*.yaml -> dse.spec -> dse.space -> dse.search ->
dse.cluster -> objectives -> dse.search -> dse.store -> dse.report.
"""

__version__ = "0.1.0"
