"""On the GPU machine: `.gpu/minilm16/` (float16 weights, prepare.py) -> a MiniLM folder in float32."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path


def main(source: str, target: str) -> None:
    from safetensors.torch import load_file, save_file

    source_path, target_path = Path(source), Path(target)
    shutil.rmtree(target_path, ignore_errors=True)
    shutil.copytree(source_path, target_path)
    weights = load_file(str(source_path / "model.safetensors"))
    save_file({name: tensor.float() for name, tensor in weights.items()}, str(target_path / "model.safetensors"))


if __name__ == "__main__":
    main(*sys.argv[1:3])
