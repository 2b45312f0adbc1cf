"""Hugging Face transformers models, for GPUs (optionally 8-/4-bit with bitsandbytes).

``TransformersGenerator(model=folder_or_id, device="cuda", load_in="4bit")`` loads with
``device_map="auto"`` and a ``BitsAndBytesConfig`` when ``load_in`` is ``8bit``/``4bit``.
On a CPU it works too (bf16), but llama.cpp is the faster CPU runtime here. Tokens
stream through ``TextIteratorStreamer`` from a worker thread; a stopping criterion
checks the cancel flag so a cancelled generation ends at the next token.

Deliberately not here: model download policy (``sources``).
"""

from __future__ import annotations

import threading

from specrag.generators.base import Timer, Usage, register, stream_from_thread

LOAD_IN = ("", "8bit", "4bit")
DTYPES = ("auto", "bf16", "fp32")


@register("transformers")
class TransformersGenerator:
    name = "transformers"
    local = True  # runs on this machine: priced at zero, not retried

    def __init__(self, model: str = "", model_path: str | None = None, device: str = "auto",
                 load_in: str = "", dtype: str = "auto"):
        if load_in not in LOAD_IN:
            raise ValueError(f"transformers load_in must be one of {LOAD_IN}, got '{load_in}'")
        if dtype not in DTYPES:
            raise ValueError(f"transformers dtype must be one of {DTYPES}, got '{dtype}'")
        self.model = model
        self.model_path = str(model_path or model)
        self.device = device
        self.load_in = load_in  # "", "8bit" or "4bit" (bitsandbytes)
        self.dtype = dtype
        self._model = None
        self._tok = None
        self._lock = threading.Lock()

    def load_kwargs(self) -> dict:
        """Keyword arguments of ``AutoModelForCausalLM.from_pretrained`` for these options."""
        import torch

        kwargs = {"dtype": {"auto": "auto", "bf16": torch.bfloat16,
                            "fp32": torch.float32}[self.dtype]}
        if self.load_in:
            try:
                from transformers import BitsAndBytesConfig
            except ImportError as err:  # pragma: no cover
                raise ImportError("8/4-bit loading needs: pip install bitsandbytes") from err
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_8bit=self.load_in == "8bit", load_in_4bit=self.load_in == "4bit")
        if self.device == "auto":
            kwargs["device_map"] = "auto" if torch.cuda.is_available() else "cpu"
        else:
            kwargs["device_map"] = self.device
        return kwargs

    def warm_up(self) -> "TransformersGenerator":
        with self._lock:
            if self._model is None:
                from transformers import AutoModelForCausalLM, AutoTokenizer

                self._tok = AutoTokenizer.from_pretrained(self.model_path)
                self._model = AutoModelForCausalLM.from_pretrained(
                    self.model_path, **self.load_kwargs()).eval()
        return self

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        self.warm_up()

        def produce(stop: threading.Event):
            from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

            class Cancel(StoppingCriteria):
                def __call__(self, *_a, **_k):
                    return stop.is_set()

            with self._lock:
                timer = Timer()
                ids = self._tok.apply_chat_template(messages, add_generation_prompt=True,
                                                    return_tensors="pt", return_dict=True)
                ids = {k: v.to(self._model.device) for k, v in ids.items()}
                streamer = TextIteratorStreamer(self._tok, skip_prompt=True,
                                                skip_special_tokens=True)
                kw = dict(**ids, max_new_tokens=max_tokens, streamer=streamer,
                          do_sample=temperature > 0,
                          stopping_criteria=StoppingCriteriaList([Cancel()]))
                if temperature > 0:
                    kw["temperature"] = temperature
                worker = threading.Thread(target=self._model.generate, kwargs=kw, daemon=True)
                worker.start()
                text = []
                for piece in streamer:
                    if piece:
                        timer.token()
                        text.append(piece)
                        yield piece
                worker.join()
                out = len(self._tok("".join(text), add_special_tokens=False)["input_ids"])
                yield Usage("transformers", self.model, int(ids["input_ids"].shape[1]), out,
                            timer.ttft_ms, timer.total_ms, cancelled=stop.is_set())

        async for item in stream_from_thread(produce):
            yield item
