#!/usr/bin/env python3
"""`swe-ark text` on a code base of more than 5,000 files: seconds per instance to read the
bundle, index its Python files, search them with BM25 and build the 27K-token prompt, beside
`swe-ark verify` of the same bundles (reading and checking a bundle is the floor: text must
read it too); and the cl100k_base tokenizer's throughput (tokens per second) against Python
tiktoken's on the same text.

The code base is generated from a seeded PRNG (Python-like modules, a README, test files that
BM25 leaves out), so every machine gets the same bytes. Three instances share it, each with
its own problem statement. Python tiktoken is installed into a venv under .tools/ from PyPI;
its encoding file comes from tiktoken's own download or, where that host is out of reach, from
the copy tiktoken-rs ships in cargo's registry (tiktoken checks its sha256 either way). When
neither can be had, the comparison is skipped with a message.

Checks (exit 1): every text is within its budget (counted by swe-ark and, when it is there,
by Python tiktoken), two runs give the same bytes, and both tokenizers count the corpus alike.

Usage: python3 bench/bench_text.py --swe-ark target/release/swe-ark [--runs 5]
           [--files 6000] [--workdir DIR] [--json FILE]
"""

import argparse
import glob
import json
import os
import random
import statistics
import subprocess
import sys
import time

import benchlib
from benchlib import CODE_WORDS, PROSE_WORDS, BenchError, log, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIKTOKEN = "tiktoken==0.14.0"
BUDGET = 27000
INSTANCES = 3
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def sentence(rng, n):
    words = [rng.choice(PROSE_WORDS if rng.random() < 0.5 else CODE_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def module(rng, i):
    lines = [f'"""{sentence(rng, rng.randint(6, 16))}"""', "", "import os", ""]
    for j in range(rng.randint(2, 8)):
        name = f"{rng.choice(CODE_WORDS)}_{rng.choice(CODE_WORDS)}_{j}"
        args = ", ".join(rng.sample(CODE_WORDS, 3))
        lines.append(f"def {name}({args}):")
        lines.append(f'    """{sentence(rng, rng.randint(5, 20))}"""')
        for _ in range(rng.randint(2, 9)):
            lines.append(f"    # {sentence(rng, rng.randint(3, 10))}")
            lines.append(f"    {rng.choice(CODE_WORDS)} = {rng.choice(CODE_WORDS)}"
                         f"({rng.choice(CODE_WORDS)}, {rng.randint(0, 9999)})")
        lines.append(f"    return {rng.choice(CODE_WORDS)}  # module {i}")
        lines.append("")
    return "\n".join(lines) + "\n"


def make_tree(tree, files, seed):
    rng = random.Random(seed)
    os.makedirs(tree)
    with open(os.path.join(tree, "README.rst"), "w") as f:
        f.write("bench\n=====\n\n" + "\n".join(sentence(rng, 12) for _ in range(20)) + "\n")
    for i in range(files):
        test = i % 20 == 0
        d = os.path.join(tree, "tests" if test else "src", f"p{i // 100:03d}")
        os.makedirs(d, exist_ok=True)
        name = f"test_m{i % 100:03d}.py" if test else f"m{i % 100:03d}.py"
        with open(os.path.join(d, name), "w") as f:
            f.write(module(rng, i))
    return rng


def problem_statement(rng):
    paras = [sentence(rng, rng.randint(20, 60)) for _ in range(rng.randint(2, 4))]
    trace = ("Traceback (most recent call last):\n"
             f'  File "src/p001/m002.py", line 12, in {rng.choice(CODE_WORDS)}_{rng.choice(CODE_WORDS)}\n'
             f"ValueError: {sentence(rng, 8)}\n")
    return "\n\n".join(paras) + "\n\n```\n" + trace + "```\n"


def tiktoken_python(work):
    """A Python with tiktoken that can load cl100k_base, and the environment it needs; or None
    with the reason."""
    venv = os.path.join(ROOT, ".tools", "bench-tiktoken")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        p = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if p.returncode != 0:
            return None, None, f"cannot make a venv: {p.stderr.strip()}"
    p = subprocess.run([py, "-m", "pip", "install", "-q", TIKTOKEN], capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, f"pip install {TIKTOKEN} failed: {p.stderr.strip()[-300:]}"
    env = dict(os.environ)
    probe = [py, "-c", "import tiktoken; tiktoken.get_encoding('cl100k_base')"]
    if subprocess.run(probe, capture_output=True, env=env).returncode == 0:
        return py, env, None
    # tiktoken's host is out of reach: give it the copy tiktoken-rs ships, under the cache
    # name tiktoken looks for. tiktoken checks the file's sha256 before it uses it.
    shipped = sorted(glob.glob(os.path.expanduser(
        "~/.cargo/registry/src/*/tiktoken-rs-*/assets/cl100k_base.tiktoken")))
    if not shipped:
        return None, None, "tiktoken cannot download cl100k_base and no copy was found"
    import hashlib
    cache = os.path.join(work, "tiktoken-cache")
    os.makedirs(cache, exist_ok=True)
    key = hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest()
    with open(shipped[-1], "rb") as src, open(os.path.join(cache, key), "wb") as dst:
        dst.write(src.read())
    env["TIKTOKEN_CACHE_DIR"] = cache
    p = subprocess.run(probe, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return None, None, f"tiktoken cannot load cl100k_base: {p.stderr.strip()[-300:]}"
    return py, env, None


PY_ENCODE = """
import json, sys, time, tiktoken
enc = tiktoken.get_encoding("cl100k_base")
paths = sys.argv[2:]
if sys.argv[1] == "count":
    print(json.dumps([len(enc.encode(open(p, encoding="utf-8").read(), disallowed_special=()))
                      for p in paths]))
else:
    text = open(paths[0], encoding="utf-8").read()
    enc.encode("warm up", disallowed_special=())
    t = time.perf_counter()
    n = len(enc.encode(text, disallowed_special=()))
    print(json.dumps({"tokens": n, "seconds": time.perf_counter() - t}))
"""


def bench(args):
    swe_ark = benchlib.require(args.swe_ark, [])
    work = os.path.abspath(args.workdir)
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    tree = os.path.join(work, "tree")
    log(f"generating a code base of {args.files} files")
    rng = make_tree(tree, args.files, args.seed)
    ark = os.path.join(work, "ark")
    sa = [swe_ark, "--ark", ark, "-q", "--no-progress"]
    commit = "%040x" % rng.getrandbits(160)
    for k in range(INSTANCES):
        inst = {"repo": "acme/bench", "instance_id": f"acme__bench-{k}", "base_commit": commit,
                "patch": "diff --git a/src/p001/m002.py b/src/p001/m002.py\n",
                "test_patch": "", "problem_statement": problem_statement(rng), "hints_text": "",
                "created_at": "2024-01-01T00:00:00Z", "version": "1.0",
                "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "environment_setup_commit": commit}
        ipath = os.path.join(work, f"inst{k}.json")
        with open(ipath, "w") as f:
            json.dump(inst, f)
        run(sa + ["pack", "--instance", ipath, "--codebase", tree], "pack")
    files = sum(len(fs) for _, _, fs in os.walk(tree))
    py_files = sum(1 for _, _, fs in os.walk(tree) for f in fs if f.endswith(".py"))

    out = os.path.join(work, "bm25.jsonl")
    text_cmd = sa + ["text", "--retrieval", "bm25", "--max-tokens", str(BUDGET), "-o", out]
    verify_cmd = sa + ["verify"]
    run(text_cmd, "text (warm-up)")
    first = open(out, "rb").read()
    run(verify_cmd, "verify (warm-up)")
    text_t, verify_t = [], []
    for r in range(args.runs):
        pair = [(text_cmd, text_t, "text"), (verify_cmd, verify_t, "verify")]
        for cmd, times, what in pair if r % 2 == 0 else reversed(pair):
            times.append(run(cmd, what)[0])
        if open(out, "rb").read() != first:
            raise BenchError("two runs of `swe-ark text` wrote different bytes")
    rows = [json.loads(line) for line in first.decode().splitlines()]
    if len(rows) != INSTANCES:
        raise BenchError(f"`swe-ark text` wrote {len(rows)} rows, not {INSTANCES}")
    texts = []
    for k, row in enumerate(rows):
        p = os.path.join(work, f"text{k}.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write(row["text"])
        texts.append(p)
    ours_counts = [json.loads(run(sa + ["text", "--count-tokens", p], "count")[1])["tokens"]
                   for p in texts]
    for n in ours_counts:
        if n > BUDGET:
            raise BenchError(f"a text has {n} tokens, over the budget of {BUDGET}")

    # The tokenizer on the whole code base's Python text.
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for d, _, fs in sorted(os.walk(tree)):
            for name in sorted(fs):
                if name.endswith(".py"):
                    f.write(open(os.path.join(d, name), encoding="utf-8").read())
    ours = [json.loads(run(sa + ["text", "--count-tokens", corpus], "count-tokens")[1])
            for _ in range(args.runs)]
    tokens = ours[0]["tokens"]
    ours_s = statistics.median(o["seconds"] for o in ours)
    summary = {
        "machine": benchlib.machine(swe_ark, []),
        "files": files, "python_files": py_files, "instances": INSTANCES, "budget": BUDGET,
        "runs": args.runs,
        "text_seconds_per_instance": statistics.median(text_t) / INSTANCES,
        "verify_seconds_per_instance": statistics.median(verify_t) / INSTANCES,
        "text_tokens": ours_counts,
        "corpus_bytes": os.path.getsize(corpus), "corpus_tokens": tokens,
        "tokenizer_seconds": ours_s, "tokenizer_tokens_per_second": tokens / ours_s,
        "tiktoken": None,
    }
    py, env, why = tiktoken_python(work)
    if py is None:
        summary["tiktoken_skipped"] = why
        return summary
    counts = json.loads(subprocess.run([py, "-c", PY_ENCODE, "count", *texts], env=env,
                                       check=True, capture_output=True, text=True).stdout)
    if counts != ours_counts:
        raise BenchError(f"token counts of the texts differ: swe-ark {ours_counts}, tiktoken {counts}")
    theirs = [json.loads(subprocess.run([py, "-c", PY_ENCODE, "time", corpus], env=env, check=True,
                                        capture_output=True, text=True).stdout)
              for _ in range(args.runs)]
    if theirs[0]["tokens"] != tokens:
        raise BenchError(f"the corpus is {tokens} tokens for swe-ark, {theirs[0]['tokens']} for tiktoken")
    their_s = statistics.median(t["seconds"] for t in theirs)
    summary["tiktoken"] = {"version": TIKTOKEN, "seconds": their_s, "tokens_per_second": tokens / their_s}
    return summary


def report(s):
    print(f"swe-ark text on a code base of {s['files']:,} files ({s['python_files']:,} Python), "
          f"{s['instances']} instances, budget {s['budget']:,} tokens, median of {s['runs']}:")
    t, v = s["text_seconds_per_instance"], s["verify_seconds_per_instance"]
    print(f"  text (read, index, search, prompt)  {t:6.2f} s per instance")
    print(f"  verify of the same bundles          {v:6.2f} s per instance   ratio {t / v:5.2f}x")
    print(f"  texts: {', '.join(f'{n:,}' for n in s['text_tokens'])} tokens")
    mb = s["corpus_bytes"] / 1e6
    print(f"cl100k_base on {mb:.1f} MB of Python ({s['corpus_tokens']:,} tokens):")
    print(f"  swe-ark (tiktoken-rs)   {s['tokenizer_tokens_per_second'] / 1e6:6.2f} M tokens/s")
    if s["tiktoken"]:
        tt = s["tiktoken"]
        print(f"  Python {tt['version']:<16} {tt['tokens_per_second'] / 1e6:6.2f} M tokens/s   "
              f"ratio {s['tokenizer_tokens_per_second'] / tt['tokens_per_second']:5.2f}x")
    else:
        print(f"  Python tiktoken: comparison skipped ({s['tiktoken_skipped']})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--swe-ark", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=20240301)
    ap.add_argument("--workdir", default=os.path.join(ROOT, "target", "bench", "text"))
    ap.add_argument("--json")
    args = ap.parse_args()
    return benchlib.finish("bench_text", bench, report, args, args.workdir)


if __name__ == "__main__":
    sys.exit(main())
