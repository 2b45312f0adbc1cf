"""Encryption at rest: keys, AES-256-GCM files and records, and no plaintext left on disk."""

from __future__ import annotations

import base64
import json
import os
import tempfile

import pytest

from specrag.security.crypto import MAGIC, DataFiles, EncryptionError, generate_key, load_key
from specrag.security.uploads import take_upload, take_uploads
from specrag.types import IngestError
from tests.support.env import make_settings

CANARY = "ZEBRA-CANARY-7731 the CFO salary is 912,345 euros"
KEY_ENV = "TEST_SPECRAG_KEY"


@pytest.fixture
def key(monkeypatch):
    value = generate_key()
    monkeypatch.setenv(KEY_ENV, value)
    return value


@pytest.fixture
def enc(tmp_path, key):
    return make_settings(tmp_path / "data", **{"security.encrypt": True,
                                                "security.key_env": KEY_ENV})


def test_keys_from_env_or_file_and_clear_errors(tmp_path, monkeypatch, key):
    s = make_settings(tmp_path, **{"security.encrypt": True, "security.key_env": KEY_ENV})
    assert load_key(s) == base64.urlsafe_b64decode(key)
    assert load_key(s, env={KEY_ENV: "ab" * 32}) == bytes.fromhex("ab" * 32)
    assert load_key(make_settings(tmp_path)) is None  # encryption off: no key needed
    with pytest.raises(EncryptionError, match=f"set \\${KEY_ENV} or security.key_file"):
        load_key(s, env={})
    with pytest.raises(EncryptionError, match="32 bytes"):
        load_key(s, env={KEY_ENV: "too-short"})
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    os.chmod(key_file, 0o644)
    from_file = s.with_values(**{"security.key_file": str(key_file)})
    with pytest.raises(EncryptionError, match="chmod 600"):
        load_key(from_file, env={})
    os.chmod(key_file, 0o600)
    assert load_key(from_file, env={}) == base64.urlsafe_b64decode(key)
    with pytest.raises(EncryptionError, match="not found"):
        load_key(s.with_values(**{"security.key_file": str(tmp_path / "nope")}), env={})
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(EncryptionError, match="no key"):
        DataFiles(s).write_text(tmp_path / "x", "data")  # fails before anything is written
    assert not (tmp_path / "x").exists()


def test_files_records_and_fields_round_trip(tmp_path, enc, monkeypatch):
    files = DataFiles(enc)
    path = files.write_text(tmp_path / "exports" / "answers.json", CANARY)
    blob = path.read_bytes()
    assert blob.startswith(MAGIC) and CANARY.encode() not in blob
    assert files.read_text(path) == CANARY
    assert files.write_text(tmp_path / "b", CANARY).read_bytes() != blob  # fresh nonce

    log = tmp_path / "audit" / "samples.jsonl"
    for i in range(3):
        files.append_line(log, json.dumps({"i": i, "answer": CANARY}))
    with open(log, "a") as fh:
        fh.write("enc:v1:AAAA")  # a crash mid-append: torn last line
    assert [json.loads(x)["i"] for x in files.read_lines(log)] == [0, 1, 2]
    assert CANARY not in log.read_text()
    sealed = files.seal(CANARY)
    assert sealed.startswith("enc:v1:") and files.unseal(sealed) == CANARY

    tampered = bytearray(blob)
    tampered[-1] ^= 1
    (tmp_path / "t").write_bytes(bytes(tampered))
    with pytest.raises(EncryptionError, match="wrong key or the data was altered"):
        files.read_bytes(tmp_path / "t")
    monkeypatch.setenv(KEY_ENV, generate_key())
    with pytest.raises(EncryptionError, match="wrong key"):
        DataFiles(enc).read_text(path)

    plain = DataFiles(make_settings(tmp_path / "p"))  # encryption off: plaintext, reads both
    plain.write_text(tmp_path / "plain.txt", "hello")
    assert (tmp_path / "plain.txt").read_text() == "hello" and plain.seal("x") == "x"


def test_uploads_are_taken_into_memory_and_wiped(tmp_path):
    up = tmp_path / "gradio" / "abc123" / "salaries.txt"
    up.parent.mkdir(parents=True)
    up.write_text(CANARY)
    assert take_upload(up) == ("salaries.txt", CANARY.encode())
    assert not up.exists()
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2048)
    items, refused = take_uploads([big], max_bytes=1024)
    assert items == [] and "big.txt: file too large" in refused[0] and not big.exists()
    with pytest.raises(IngestError, match="too large"):
        take_upload(_write(tmp_path / "b2.txt", b"y" * 20), max_bytes=10)
    assert not (tmp_path / "b2.txt").exists()


def _write(path, data):
    path.write_bytes(data)
    return path


def scan(root, needles) -> list[str]:
    hits = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                data = open(path, "rb").read()
            except OSError:
                continue
            if any(n in data for n in needles):
                hits.append(path)
    return hits


def test_no_plaintext_left_in_temp_or_data_directories(tmp_path, enc, embedder, monkeypatch):
    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.retriever import Retriever

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    upload = tmp / "gradio" / "f00d" / "payroll.md"  # what a web server leaves for the handler
    upload.parent.mkdir(parents=True)
    upload.write_text(f"# Payroll\n\n{CANARY}.\n")

    items, _ = take_uploads([upload])
    ing = Ingestor(enc, embedder=embedder)
    report = ing.ingest_bytes(items, "hr")  # parsed in memory
    assert report.results[0].status == "added"
    hit = Retriever(enc, embedder=embedder, store=ing.store).retrieve("CFO salary", 1, "hr").hits[0]
    files = DataFiles(enc)
    data = enc.data_path
    files.write_bytes(data / "cache" / "answers" / "q1.bin", hit.chunk.text.encode())
    files.append_line(data / "audit" / "samples.jsonl", json.dumps({"context": hit.chunk.text}))
    files.write_text(data / "exports" / "hr.json", json.dumps({"chunks": [hit.chunk.text]}))

    needles = [CANARY.encode(), CANARY.encode("utf-16-le"), b"ZEBRA-CANARY"]
    assert scan(tmp, needles) == []
    # the vector store and its keyword index keep chunk text in plaintext (documented:
    # use an encrypted volume); nothing else does
    store = (str(data / "chroma"), str(data / "keyword"))
    assert [p for p in scan(data, needles) if not p.startswith(store)] == []
    assert scan(data / "chroma", needles)  # the scan does see plaintext where it is
    assert scan(data / "keyword", needles)
    assert files.read_text(data / "exports" / "hr.json").count("ZEBRA-CANARY") == 1
    leftovers = [n for _, _, names in os.walk(data) for n in names if n.endswith(".tmp")]
    assert leftovers == []
