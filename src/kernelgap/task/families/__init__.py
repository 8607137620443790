"""The family builders, one module per kind of family (docs/adding-a-family.md).

Every module of this package registers its builders with
:func:`~kernelgap.task.registry.register_family` when imported, and is imported here, found
by listing the package: a new family is a new module and nothing else.  A module may import
another (``ladder`` reads ``witness``'s chains); the order the modules load in changes no
registration, for every name is registered once.

* :mod:`.exhaustive`: ``exhaustive`` (every sequence, small m) and ``pool`` (disjoint
  train/test token pools);
* :mod:`.witness`: ``witness``, ``hadamard`` and ``cw`` (codes and the witness family);
* :mod:`.ladder`: ``ladder``, the product family the certificate grows on as ``2^{0.1·m}``;
* :mod:`.layer`: ``layer``, the weight-m/2 layer at context length N;
* :mod:`.code4`: ``code4``, larger distance-4 codes of the layer (group classes, S(5, 6, 12),
  a local search in :mod:`.johnson_search`) at context length N;
* :mod:`.ood`: ``ood``, disjoint train/test pools of queries.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
