#!/usr/bin/env python3
"""Checks `swe-ark text` against SWE-bench's own code on real instances, by hand (not part of
the test suite: it needs a checkout of SWE-bench, local git mirrors of the repositories, Java
with Debian's Lucene, and Python packages from PyPI).

For each instance: the code base at the base commit is packed into a scratch archive; the BM25
hits are computed by Apache Lucene (tests/fixtures/text/LuceneReference.java: the English
analyzer and BM25(0.9, 0.4) that Pyserini uses) over the documents SWE-bench's own
`list_files` picks; SWE-bench's `create_instance.add_text_inputs` makes the prompts from those
hits (bm25, 27,000 cl100k tokens) and for the oracle, and `create_text_dataset`'s last step
(strip, blank line, <patch> tags) finishes them. swe-ark's hits (order and score bits), texts
and patches must be the same.

Setup:
    apt-get install liblucene8-java default-jdk-headless
    python3 -m venv /tmp/v && /tmp/v/bin/pip install tiktoken unidiff gitpython chardet tqdm
    # tiktoken needs cl100k_base.tiktoken: its download, or TIKTOKEN_CACHE_DIR (see
    # tests/fixtures/text/gen_cl100k_vectors.py)
Run:
    /tmp/v/bin/python scripts/text-upstream-check.py --swebench ~/SWE-bench \\
        --data swe-bench-lite-dev.jsonl --mirror marshmallow-code/marshmallow=/path/to/git \\
        --swe-ark target/release/swe-ark marshmallow-code__marshmallow-1343 ...
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "text")
JARS = ["/usr/share/java/lucene-core-8.7.0.jar", "/usr/share/java/lucene-analyzers-common-8.7.0.jar"]
STUB = '''import tiktoken
def cl100k(text, tokenizer):
    return tokenizer.encode(text, disallowed_special=())
TOKENIZER_FUNCS = {"cl100k": (tiktoken.get_encoding("cl100k_base"), cl100k)}
'''


def run(*a):
    return subprocess.run(a, check=True, capture_output=True, text=True).stdout


def upstream(swebench, work):
    """SWE-bench's create_instance and utils, importable without the Llama tokenizer that its
    tokenize_dataset loads at import time."""
    pkg = os.path.join(work, "up", "swebench", "inference", "make_datasets")
    os.makedirs(pkg)
    for d in (os.path.join(work, "up", "swebench"), os.path.dirname(pkg), pkg):
        open(os.path.join(d, "__init__.py"), "w").close()
    src = os.path.join(swebench, "swebench", "inference", "make_datasets")
    for name in ("create_instance.py", "utils.py"):
        shutil.copy(os.path.join(src, name), pkg)
    open(os.path.join(pkg, "tokenize_dataset.py"), "w").write(STUB)
    sys.path.insert(0, os.path.join(work, "up"))
    from swebench.inference.make_datasets import create_instance, utils
    return create_instance, utils


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--swebench", required=True, help="a checkout of SWE-bench")
    ap.add_argument("--data", required=True, help="the instances (JSON Lines)")
    ap.add_argument("--mirror", action="append", default=[], help="OWNER/NAME=GIT_DIR")
    ap.add_argument("--swe-ark", required=True)
    ap.add_argument("ids", nargs="+")
    args = ap.parse_args()
    mirrors = dict(m.split("=", 1) for m in args.mirror)
    swe_ark = os.path.abspath(args.swe_ark)
    work = tempfile.mkdtemp(prefix="text-upstream-")
    ci, su = upstream(args.swebench, work)
    classes = os.path.join(work, "classes")
    run("javac", "-cp", ":".join(JARS), "-d", classes, os.path.join(FIXTURES, "LuceneReference.java"))
    insts = [json.loads(l) for l in open(args.data)]
    insts = [i for i in insts if i["instance_id"] in args.ids]
    ark = os.path.join(work, "ark")
    failed = 0
    for inst in insts:
        iid = inst["instance_id"]
        # "repos/" and the id: no word of the path may look like a test directory to is_test.
        repo = os.path.join(work, "repos", iid)
        run("git", "clone", "-q", "--shared", "--no-checkout", mirrors[inst["repo"]], repo)
        run("git", "-C", repo, "checkout", "-q", inst["base_commit"])
        cb = os.path.join(work, "cb", iid)
        os.makedirs(cb)
        subprocess.run(f"git -C {repo} archive {inst['base_commit']} | tar -x -C {cb}",
                       shell=True, check=True)
        ipath = os.path.join(work, iid + ".json")
        json.dump(inst, open(ipath, "w"))
        run(swe_ark, "--ark", ark, "-q", "pack", "--instance", ipath, "--codebase", cb)

        docs = os.path.join(work, "docs", iid)
        for rel in su.list_files(repo, include_tests=False):
            os.makedirs(os.path.dirname(os.path.join(docs, rel)), exist_ok=True)
            shutil.copyfile(os.path.join(repo, rel), os.path.join(docs, rel))
        qdir = os.path.join(work, "q", iid)
        os.makedirs(qdir)
        open(os.path.join(qdir, "q.txt"), "w", encoding="utf-8", newline="").write(inst["problem_statement"])
        out = run("java", "-cp", ":".join(JARS + [classes]), "LuceneReference", "search", docs, qdir, "20")
        lucene = [l.split("\t") for l in out.splitlines()]
        retrieval = os.path.join(work, iid + ".retrieval.jsonl")
        hits = [{"docid": h[3], "score": float(h[5])} for h in lucene]
        open(retrieval, "w").write(json.dumps({"instance_id": iid, "hits": hits}) + "\n")

        class LocalContext(su.ContextManager):
            def __init__(self, instance, root_dir=None, verbose=False, token=None):
                super().__init__(repo, instance["base_commit"], verbose=verbose)

        ci.AutoContextManager = LocalContext
        for source, budget in (("bm25", 27000), ("oracle", None)):
            progress = os.path.join(work, f"{iid}.{source}.progress.jsonl")
            ci.add_text_inputs({iid: dict(inst)}, retrieval if budget else None, None, "style-3",
                               source, max_context_len=budget,
                               tokenizer_name="cl100k" if budget else None, progress_file=progress)
            up = json.loads(open(progress).readline())
            want_text = up["text_inputs"].strip() + "\n\n"
            want_patch = "\n".join(["<patch>", up["patch"], "</patch>"])
            ours_file = os.path.join(work, f"{iid}.{source}.jsonl")
            cmd = [swe_ark, "--ark", ark, "-q", "text", "--retrieval", source,
                   "--instance-ids", iid, "-o", ours_file]
            hits_file = os.path.join(work, f"{iid}.hits.jsonl")
            if budget:
                cmd += ["--hits", hits_file]
            run(*cmd)
            ours = json.loads(open(ours_file).readline())
            same = ours["text"] == want_text and ours["patch"] == want_patch
            line = f"{iid} {source}: text and patch {'identical' if same else 'DIFFERENT'}"
            if budget:
                got = json.loads(open(hits_file).readline())["hits"]
                bits = lambda x: struct.unpack(">I", struct.pack(">f", x))[0]
                same_hits = [(h["docid"], bits(h["score"])) for h in got] == \
                    [(h[3], int(h[4], 16)) for h in lucene]
                line += f"; {len(got)} hits {'identical to Lucene' if same_hits else 'DIFFERENT from Lucene'}"
                same = same and same_hits
            if not same:
                failed += 1
                open(ours_file + ".upstream.txt", "w").write(want_text)
            print(line, flush=True)
    print(f"{len(insts)} instance(s), {failed} difference(s); files in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
