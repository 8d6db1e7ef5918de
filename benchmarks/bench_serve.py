"""Latency and throughput of `real-attention serve --model minilm` against `ra.attend` + `ra.classify` in process.

The server runs as its own process on a free port; this process loads the same model for the baseline. Both
answer the lesson's two sentences (focus "banco", senses "jardín" and "dinero"); each POST /api/attend asks a
sentence pair the server has not seen (a new word at the end), so no answer comes from its cache.

1. One client: the median latency of POST /api/attend (the whole answer read, over a kept-alive connection)
   against ra.attend + ra.classify in process, interleaved. Target: <= 1.3x.
2. Eight concurrent clients: the sentences per second they get in total against the in-process serial rate.
   Target: >= 0.9x (queued requests share forward passes).
p50 and p95 latencies are printed for both.

    python benchmarks/bench_serve.py [--repeats 40] [--requests 96] [--threads 1]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXTS = ["Me senté en el banco de mi jardín", "Fui al banco a sacar dinero"]
EXTRA = ["hoy", "ayer", "temprano", "tarde", "otra vez", "con calma", "sin prisa", "de nuevo", "solo", "contento"]


def body(i: int) -> dict:
    """The lesson's pair with a new ending per request (the server caches repeated questions)."""
    ending = f" {EXTRA[i % len(EXTRA)]} {i}."
    return {"texts": [text + ending for text in TEXTS], "focus": "banco", "sense": ["jardín", "dinero"]}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Client:
    """One kept-alive HTTP connection to the server."""

    def __init__(self, host: str, port: int) -> None:
        self.connection = http.client.HTTPConnection(host, port, timeout=120)

    def attend(self, payload: dict) -> bytes:
        for attempt in (1, 2):  # the server closes a connection left idle for 5 s: open a new one
            try:
                self.connection.request("POST", "/api/attend", body=json.dumps(payload).encode(),
                                        headers={"Content-Type": "application/json"})
                response = self.connection.getresponse()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                self.connection.close()
                if attempt == 2:
                    raise
        data = response.read()
        assert response.status == 200, data[:300]
        return data


def start_server(threads: int) -> tuple[subprocess.Popen, str, int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-c", "import real_attention; real_attention.main()", "serve",
                                "--model", "minilm", "--port", str(port)], stdout=subprocess.PIPE, text=True,
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)})
    line = process.stdout.readline()
    assert re.search(r"http://127\.0\.0\.1:\d+/", line), line
    return process, "127.0.0.1", port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40, help="Requests of the one-client latency test.")
    parser.add_argument("--requests", type=int, default=96, help="Requests of the throughput test (8 clients).")
    parser.add_argument("--threads", type=int, default=1,
                        help="Torch threads of both the server and this process (OMP_NUM_THREADS); on a busy "
                             "machine more threads than free cores make either side's times erratic.")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)

    import numpy as np

    import real_attention as ra

    model = ra.load("minilm")
    process, host, port = start_server(args.threads)
    try:
        client = Client(host, port)
        answer = json.loads(client.attend(body(0)))  # warm both, and check the answer once
        att = ra.attend(model, body(0)["texts"], focus="banco", sense=["jardín", "dinero"])
        assert np.abs(np.array(answer["sentences"][0]["weights"]) - att[0].weights).max() < 2e-6
        ra.classify(att)

        local, remote = [], []
        for i in range(1, args.repeats + 1):  # interleaved, so both see the same machine load
            start = time.perf_counter()
            ra.classify(ra.attend(model, body(i)["texts"], focus="banco", sense=["jardín", "dinero"]))
            local.append(time.perf_counter() - start)
            start = time.perf_counter()
            client.attend(body(10_000 + i))
            remote.append(time.perf_counter() - start)

        # Throughput: the in-process serial rate, then 8 clients at once.
        count = args.requests
        start = time.perf_counter()
        for i in range(count):
            ra.classify(ra.attend(model, body(20_000 + i)["texts"], focus="banco", sense=["jardín", "dinero"]))
        serial_rate = 2 * count / (time.perf_counter() - start)

        clients = [Client(host, port) for _ in range(8)]
        latencies: list[float] = []
        lock = threading.Lock()

        def run(k: int) -> None:
            for i in range(k, count, 8):
                begin = time.perf_counter()
                clients[k].attend(body(30_000 + i))
                with lock:
                    latencies.append(time.perf_counter() - begin)

        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(run, range(8)))
        server_rate = 2 * count / (time.perf_counter() - start)
    finally:
        process.terminate()
        process.wait(30)

    ms = 1000
    print(f"torch threads: {args.threads} in each process")
    print(f"one client, {args.repeats} requests of 2 sentences (MiniLM):")
    print(f"  in process ra.attend + ra.classify: median {statistics.median(local) * ms:.1f} ms, "
          f"p95 {percentile(local, 0.95) * ms:.1f} ms")
    print(f"  POST /api/attend:                   median {statistics.median(remote) * ms:.1f} ms "
          f"(p50 {percentile(remote, 0.5) * ms:.1f}, p95 {percentile(remote, 0.95) * ms:.1f} ms)")
    print(f"  ratio of medians: {statistics.median(remote) / statistics.median(local):.2f}x (target <= 1.3x)")
    print(f"eight clients, {count} requests of 2 sentences:")
    print(f"  in process, serial: {serial_rate:.1f} sentences/s")
    print(f"  server, 8 clients:  {server_rate:.1f} sentences/s; latency p50 {percentile(latencies, 0.5) * ms:.1f} ms, "
          f"p95 {percentile(latencies, 0.95) * ms:.1f} ms")
    print(f"  ratio: {server_rate / serial_rate:.2f}x (target >= 0.9x)")


if __name__ == "__main__":
    main()
