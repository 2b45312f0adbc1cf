"""The app's API endpoints through gradio_client against a real launched server."""

import pytest

from tests.support.docs import write_bad_files, write_handbook
from tests.support.env import free_port, make_settings

pytestmark = pytest.mark.slow


@pytest.fixture
def app_url(tmp_path):
    from specrag.ui.app import build

    demo = build(make_settings(tmp_path / "data"))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                share=False, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()


def test_ingest_then_search_through_the_api(tmp_path, app_url):
    from gradio_client import Client, handle_file
    from gradio_client.exceptions import AppError

    good = write_handbook(tmp_path / "docs")
    bad = write_bad_files(tmp_path / "docs")
    client = Client(app_url, verbose=False)
    summary, results, docs = client.predict(
        [handle_file(str(good["leave.pdf"])), handle_file(str(bad["locked.pdf"])),
         handle_file(str(good["oncall.md"]))], "default", api_name="/ingest")
    assert summary.startswith("2 stored, 0 already present, 1 failed")
    rows = {r[0]: r for r in results["data"]}
    assert rows["locked.pdf"][1] == "failed" and "encrypted" in rows["locked.pdf"][3]
    assert sorted(r[0] for r in docs["data"]) == ["leave.pdf", "oncall.md"]

    status, hits = client.predict("parental leave", "default", 3, api_name="/search")
    assert status.startswith("2 chunks") or status.startswith("3 chunks")
    assert hits["data"][0][2] == "leave.pdf" and hits["data"][0][3] == 2

    msg, docs = client.predict("oncall.md", "default", api_name="/delete")
    assert msg == "Deleted oncall.md." and [r[0] for r in docs["data"]] == ["leave.pdf"]
    with pytest.raises(AppError, match="collection 'missing' does not exist"):
        client.predict("x", "missing", 3, api_name="/search")
