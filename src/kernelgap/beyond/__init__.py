"""Beyond the paper (issue #6): the loopholes it leaves open, measured.

* ``signed`` / ``heads`` / ``zoo`` experiments are ordinary sweeps (configs/<profile>/);
* :mod:`.precision` trains the models of the ``precision`` sweep and evaluates
  them through a kernel sketch quantized to ``b`` bits per number;
* :mod:`.extras` writes the untrained numbers beside the runs (certificates,
  quantized evaluations, the probe of the shipped example);
* the report section lives in :mod:`kernelgap.report.beyond`.

Per-profile settings that are not sweep fields (bits, quantizers, probe target)
live in ``configs/<profile>/beyond.toml``; see :func:`.settings.load_settings`.
"""
