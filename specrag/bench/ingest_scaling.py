"""Is ingest linear? Seconds per MB of text from 100 KB to 10 MB, per format, and the
hostile documents that used to stall the server.

``run(settings, sizes_mb)`` builds documents by code (``hostile_docs``: prose, run-on
Chinese text with no sentence breaks, a server log, Markdown, HTML, Word, PDF), each at
every size, and times the two steps whose cost depends on the document's shape: parsing,
exactly as served (``Ingestor.parse``: the parser process and its limits), and chunking
(the real tokenizer). Per format it reports seconds per MB of extracted text at each
size and the ratio of the largest size's to the smallest's (1.0 is linear). ``HOSTILE``
cases are timed the same way, with how each one ends.

Deliberately not here: embedding and storage (batched, linear in chunks and the same for
every format), and retrieval quality (``bench retrieval``).
"""

from __future__ import annotations

import os
import platform
import random
import time
from dataclasses import replace

from specrag.bench import hostile_docs as docs
from specrag.ingest.ingestor import Ingestor
from specrag.settings import Settings
from specrag.types import IngestError

SIZES_MB = (0.1, 1.0, 10.0)
_WORDS = ("employee manager leave annual request approve policy travel expense receipt "
          "deadline office remote security badge laptop contract salary benefit pension "
          "training review team project customer invoice payment month week day year "
          "written notice period holiday sick parental insurance claim form portal").split()


def _paragraphs(chars: int, seed: int = 0) -> list[str]:
    """Varied sentences, so a Word or PDF file compresses like a real one (3-5x)."""
    rng = random.Random(seed)
    out, n = [], 0
    while n < chars:
        sentences = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 20))).capitalize()
                     + f" within {rng.randint(2, 90)} days." for _ in range(rng.randint(3, 6))]
        out.append(" ".join(sentences))
        n += len(out[-1]) + 2
    return out


FORMATS = {
    "text": lambda n: ("prose.txt", "\n\n".join(_paragraphs(n)).encode()),
    "text, no sentence breaks (Chinese)": lambda n: ("zh.txt", docs.chinese_text(n).encode()),
    "server log": lambda n: ("server.txt", docs.server_log(n // 105).encode()),
    "markdown": lambda n: ("doc.md", "\n\n".join(
        f"## Section {i}\n\n{p}" for i, p in enumerate(_paragraphs(n))).encode()),
    "html": lambda n: ("page.html", ("<html><body>" + "".join(
        f"<div><h2>S{i}</h2><p>{p}</p></div>" for i, p in enumerate(_paragraphs(n)))
        + "</body></html>").encode()),
    "docx": lambda n: ("doc.docx", docs.docx_of(_paragraphs(n))),
    "pdf": lambda n: ("doc.pdf", docs.pdf_of(" ".join(_paragraphs(n)))),
}
HOSTILE = {
    "876 KB of Chinese text (138 s before)": lambda: ("zh.txt",
                                                    docs.chinese_text(876_000).encode()),
    "306 KB server log (17.5 s before)": lambda: ("server.txt",
                                                 docs.server_log(2_900).encode()),
    "PDF drawing a form in itself, 10^6 copies": lambda: ("laughs.pdf",
                                                        docs.recursive_form_pdf(6)),
    "docx of 150,000 one-word paragraphs": lambda: ("short.docx",
                                                    docs.many_paragraph_docx(150_000, 1)),
    "HTML nested 10,000 deep (3.6 s before)": lambda: ("deep.html",
                                                      docs.nested_html(10_000).encode()),
    "HTML nested 100,000 deep (>300 s before)": lambda: ("deeper.html",
                                                        docs.nested_html(100_000).encode()),
    "HTML of 20,000 unclosed paragraphs": lambda: ("wide.html",
                                                  ("<p>para " * 20_000).encode()),
}


def _time(ingestor: Ingestor, name: str, data: bytes) -> dict:
    t0 = time.perf_counter()
    try:
        doc = ingestor.parse(data, name)
    except IngestError as err:
        return {"bytes": len(data), "parse_s": time.perf_counter() - t0, "chunk_s": 0.0,
                "chars": 0, "chunks": 0, "outcome": str(err)}
    t1 = time.perf_counter()
    chunks = ingestor._chunker.chunk(doc, "bench")
    t2 = time.perf_counter()
    return {"bytes": len(data), "parse_s": t1 - t0, "chunk_s": t2 - t1, "chars": len(doc.text),
            "chunks": len(chunks), "outcome": f"{len(chunks)} chunks"}


def run(settings: Settings, sizes_mb=SIZES_MB, formats=None, hostile: bool = True,
        progress=None) -> dict:
    # the largest size must fit under the character cap, or it would only measure a refusal
    biggest = int(max(sizes_mb) * 1_000_000 * 1.1)
    chunking = replace(settings.chunking, max_chars=max(settings.chunking.max_chars, biggest))
    ingestor = Ingestor(replace(settings, chunking=chunking)).warm_up()
    ingestor.parse(b"warm up the parser process", "warm.txt")  # its start is not per MB
    out = {"machine": {"cpu": _cpu(), "python": platform.python_version(),
                       "isolation": settings.chunking.parse_isolation},
           "sizes_mb": list(sizes_mb), "formats": {}, "hostile": {}}
    for fmt in formats or FORMATS:
        rows = []
        for mb in sizes_mb:
            name, data = FORMATS[fmt](int(mb * 1_000_000))
            row = _time(ingestor, name, data)
            row["s_per_mb"] = (row["parse_s"] + row["chunk_s"]) / max(row["chars"] / 1e6, 1e-9)
            rows.append(row)
            if progress:
                progress(f"{fmt} {mb:g} MB: {row['s_per_mb']:.2f} s/MB")
        out["formats"][fmt] = {"rows": rows,
                               "ratio": rows[-1]["s_per_mb"] / max(rows[0]["s_per_mb"], 1e-9)}
    for case in (HOSTILE if hostile else {}):
        name, data = HOSTILE[case]()
        out["hostile"][case] = _time(Ingestor(settings, embedder=ingestor.embedder,
                                              store=ingestor.store).warm_up(), name, data)
        if progress:
            progress(f"{case}: {out['hostile'][case]['outcome']}")
    return out


def to_markdown(result: dict) -> str:
    m = result["machine"]
    sizes = result["sizes_mb"]
    lines = [f"Machine: {m['cpu']}; parse isolation: {m['isolation']}; Python {m['python']}.",
             "", "| format (s per MB of text) | " + " | ".join(f"{mb:g} MB" for mb in sizes)
             + " | largest / smallest |", "|---" * (len(sizes) + 2) + "|"]
    for fmt, v in result["formats"].items():
        cells = " | ".join(f"{r['s_per_mb']:.2f}" for r in v["rows"])
        lines.append(f"| {fmt} | {cells} | {v['ratio']:.2f}x |")
    if result["hostile"]:
        lines += ["", "| hostile document | size | parse + chunk | outcome |", "|---|---|---|---|"]
        for case, r in result["hostile"].items():
            lines.append(f"| {case} | {r['bytes'] / 1000:.1f} kB | "
                         f"{r['parse_s'] + r['chunk_s']:.2f} s | {r['outcome']} |")
    return "\n".join(lines) + "\n"


def _cpu() -> str:
    """The CPU as ``lscpu`` names it, with family/model and the vector units that matter."""
    try:
        info = dict(line.split(":", 1) for line in open("/proc/cpuinfo").read().split("\n\n")[0]
                    .splitlines() if ":" in line)
    except OSError:
        return platform.processor() or platform.machine()
    info = {k.strip(): v.strip() for k, v in info.items()}
    flags = set(info.get("flags", "").split())
    units = [f for f in ("avx2", "avx512f", "amx_tile") if f in flags]
    return (f"{info.get('model name', '?')}, family {info.get('cpu family', '?')} model "
            f"{info.get('model', '?')}, {'/'.join(units) or 'no avx2'}, {os.cpu_count()} cores")
