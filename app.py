"""Start the specrag web app: ``python app.py`` (also the Hugging Face Space entry)."""

import os

from specrag.ui.app import build, css

if __name__ == "__main__":
    build().launch(share=False, css=css(), server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
