"""The family builders, one module per kind of family (docs/adding-a-family.md).

Every module of this package registers its builders with
:func:`~kernelgap.task.registry.register_family` when imported, and is imported here, found
by listing the package: a new family is a new module and nothing else.  Every name is
registered once, so the order the modules load in changes nothing.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
