"""A checkout's entry point: `python real_attention.py run --lang es` without installing anything.

The package is analysis/real_attention/ (the source root is analysis/). Run as a script, this file puts that
source root first on sys.path and calls the command line; imported as `real_attention` from the checkout's root
folder, it hands the importer the package itself, so every class has one identity. Run again under another name
(a process that multiprocessing or Dask spawns loads it as `__mp_main__`), it only sets the path. It is not in the
wheel.
"""
import importlib
import sys
from pathlib import Path

_SOURCE_ROOT = str(Path(__file__).resolve().parent / "analysis")
# First on the path, even where an editable install lists it later: this folder, also on the path, holds this file.
if _SOURCE_ROOT in sys.path:
    sys.path.remove(_SOURCE_ROOT)
sys.path.insert(0, _SOURCE_ROOT)

if __name__ == "__main__":
    from real_attention.cli import main

    main()
elif __name__ == "real_attention":  # `import real_attention` found this file first: replace it with the package
    del sys.modules[__name__]
    sys.modules[__name__] = importlib.import_module(__name__)
