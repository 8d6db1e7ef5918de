"""Wall time of `run --model minilm` on 200 sentences with figures and report against `--no-figures`, as a ratio.

The config is synthesised: 200 distinct Spanish sentences around «banco», half in the garden sense, half in
the money sense, each with its own sense word. Both commands run as fresh processes, interleaved, several
times; the ratio of the medians is printed. Target: <= 4. `--all` also times `--all-figures` (every
sentence's heatmaps and bars: about a thousand figures) once per repeat.

    python benchmarks/bench_many.py [--repeats 3] [--sentences 200] [--all]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench_run import compare  # benchmarks/ is on sys.path when this file runs as a script

OPENINGS = ("Ayer", "Esta mañana", "Después de comer", "Cuando llegó el verano", "Sin decir nada",
            "Como cada domingo", "Antes de la reunión", "Con mucho cuidado", "Por la tarde", "Al final")
PLACES = ("jardín", "parque", "plaza", "río", "puerto", "pueblo", "bosque", "paseo", "lago", "patio")
THINGS = ("dinero", "efectivo", "euros", "ahorros", "billetes", "monedas", "fondos", "dólares", "pesos", "cheques")


def config(count: int) -> str:
    """A TOML config of `count` distinct sentences (at most 2 x 10 x 10 x 10 = 2000)."""
    lines = ['[es]', 'focus = "banco"', '']
    made = 0
    for number in range(count):
        opening = OPENINGS[number % 10]
        if number % 2 == 0:
            sense = PLACES[(number // 2) % 10]
            extra = ("viejo", "nuevo", "verde", "grande", "pequeño", "bonito", "tranquilo", "soleado",
                     "frío", "lejano")[(number // 20) % 10]
            text = f"{opening} me senté en el banco del {sense} {extra} a leer un rato."
        else:
            sense = THINGS[(number // 2) % 10]
            extra = ("mucho", "poco", "algo de", "todo el", "más", "menos", "bastante", "el resto del",
                     "parte del", "otra vez")[(number // 20) % 10]
            text = f"{opening} fui al banco a sacar {extra} {sense} para el viaje."
        lines += ['[[es.sentences]]', f'text = "{text}"', f'sense = "{sense}"', '']
        made += 1
    assert made == count
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--all", action="store_true", help="also time --all-figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        path = Path(out) / "many.toml"
        path.write_text(config(args.sentences), encoding="utf-8")
        tool = [sys.executable, "-m", "real_attention", "run", "--model", "minilm", "--config", str(path),
                "--out", out, "--quiet"]
        commands = {"run --no-figures": tool + ["--no-figures"], "run (figures and report)": tool}
        if args.all:
            commands["run --all-figures"] = tool + ["--all-figures"]
        print(f"{args.sentences} sentences")
        compare(commands, "run --no-figures", args.repeats)


if __name__ == "__main__":
    main()
