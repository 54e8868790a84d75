"""The model against published runs: validation, the fit of its few factors, and its intervals' derivation.

- ``validation``: predictions of the published training runs (catalog/training_runs.csv);
- ``fit``: the bounded least-squares fit of the efficiency factors (``python -m objectives.fitting.fit``);
- ``interval_derivation``: what the training and serving interval derivations share;
- ``interval_fit``: the intervals' parameters from the held-out residuals, and their coverage;
- ``generation_check``: leave one GPU generation out;
- ``own_runs``: the model calibrated on a user's own runs (``dse calibrate``).

These run offline (``make fit``); at run time the model reads only what they wrote (calibration.json,
catalog/intervals.json).
"""
