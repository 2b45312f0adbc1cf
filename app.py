"""Start the specrag web app: ``python app.py`` (also the Hugging Face Space entry).

Settings come from ``specrag.yaml`` / ``SPECRAG_*`` variables as everywhere else; on a
Space, set the Claude key as a secret named like ``anthropic_api_key_env`` says
(``ANTHROPIC_API_KEY`` by default). Models load when a browser opens the page or on the
first question, not here; their files are fetched from here on, in the background
(``model_files.pull_all``, progress in the log), so a first question waits less. With
``security.users_file`` set the app asks for a login (``specrag users add NAME``).
"""

import logging
import os
import threading

from specrag import model_files
from specrag.settings import Settings
from specrag.ui.app import build, launch_options

if __name__ == "__main__":
    settings = Settings.load()[0]
    # specrag's own progress lines (model downloads, warming) in the app's log
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("specrag").setLevel(logging.INFO)
    threading.Thread(target=model_files.pull_all, args=(settings,), daemon=True,
                     name="specrag-pull").start()
    demo = build(settings)
    # the chat and, under /v1, the OpenAI-compatible endpoint (``specrag.api``)
    demo.launch(share=False, server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                **launch_options(settings, demo))
