#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/ carried (python benchmarks/gpu/prepare.py makes it here):
# the tests that compare the CPU with a second device, then issue 28's ratios on that device, each in $OUT.
#
#   bash benchmarks/gpu/check.sh            # DEVICE=cuda LINES=18200 (the seeds repeated, as the issue measured)
#
# About 6-8 minutes on an H100 (the tests 1-2, the corpus 3-4, the rest 1-2); everything it prints also lands in
# $OUT/*.txt and *.json (6 files).
set -uo pipefail
DEVICE=${DEVICE:-cuda}
LINES=${LINES:-18200}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl \
    || exit 1
export PYTHONPATH="/tmp/site:$PWD/analysis" PYTHONUNBUFFERED=1 REAL_ATTENTION_UD="$PWD/.gpu/ud" TOKENIZERS_PARALLELISM=false
python3 benchmarks/gpu/unpack.py .gpu/minilm16 /tmp/minilm || exit 1
{ nvidia-smi -L 2>/dev/null; nproc; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'cuda', torch.cuda.is_available())"; } 2>&1 | tee "$OUT/env.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider -k "second_device or cuda or device" \
    tests/test_exact.py tests/test_corpus.py tests/test_mixing.py tests/test_device.py 2>&1 | tee "$OUT/tests.txt"
timeout 300 python3 benchmarks/bench_corpus.py --model /tmp/minilm --device "$DEVICE" --sentences "$LINES" --repeats 2 \
    --skip-memory --skip-naive --json "$OUT/corpus.json" 2>&1 | tee "$OUT/corpus.txt"
timeout 120 python3 benchmarks/bench_corpus.py --model /tmp/minilm --device "$DEVICE" --post-forward --repeats 3 \
    --json "$OUT/post_forward.json" 2>&1 | tail -3
timeout 180 python3 benchmarks/bench_syntax.py --model /tmp/minilm --device "$DEVICE" --repeats 3 --json "$OUT/syntax.json" \
    2>&1 | tail -4
