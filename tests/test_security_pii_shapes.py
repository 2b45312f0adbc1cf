"""PII in the shapes people type: unlisted names, compact phones, lower-case IBANs, dotted
cards, internationalised addresses; what must be left alone; the held-out evaluation."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from specrag.generators.base import collect
from specrag.pipeline.prompts import build_messages
from specrag.security import redacting
from specrag.security.common_words import NOT_PERSON, PLACE_STARTERS, STOP_WORDS
from specrag.security.names import GIVEN_NAMES, GREETINGS, PARTICLES, TITLES
from specrag.security.pii import detect
from specrag.security.pii_eval import evaluate, generate
from specrag.security.pii_eval_data import PEOPLE, UNLISTED
from specrag.security.redact import Redaction
from specrag.types import Chunk

# (kind, value, text with {} where the value goes): the issue's shapes and their kin
SHAPES = [
    ("name", "Siobhan Ní Bhriain", "The lease was signed by {} yesterday."),
    ("name", "Иван Петров", "{} approved the refund."),
    ("name", "Xochitl Quispe", "Please forward the file to {} today."),
    ("name", "Γιώργος Παπαδόπουλος", "Interview panel: {}."),
    ("name", "Nguyễn Thị Hương", "Flights for {} are booked."),
    ("name", "Annelies van der Meer", "{} from accounting flagged it."),
    ("name", "Guadalupe de la Fuente", "I spoke with {} about it."),
    ("name", "Noura bint Khalid", "Contact person: {}."),
    ("name", "Oluwaseun Adeyemi-Bakare", "Thanks to {} for the help."),
    ("name", "Tadhg O'Sullivan", "{} said the rollout is on track."),
    ("name", "Zhou Xiuying", "Meeting notes: {} will present."),
    ("name", "Aishwarya", "Dear {}, your order shipped."),
    ("name", "王伟", "Dear {}, your order shipped."),
    ("name", "Quispe", "Sra. {} called back."),
    ("phone", "4155550134", "Call me on {} after five."),
    ("phone", "07700900123", "Mobile: {}"),
    ("phone", "+14155550134", "Backup line {}."),
    ("phone", "(415)5550134", "Tel. {}"),
    ("phone", "0044 20 7946 0958", "Office {} (London)."),
    ("phone", "+44.20.7946.0958", "Switchboard {}."),
    ("phone", "+91-98765-43210", "WhatsApp {} for updates."),
    ("iban", "de89 3704 0044 0532 0130 00", "Pay to iban {} please."),
    ("iban", "de89370400440532013000", "Account {}."),
    ("iban", "Gb82 West 1234 5698 7654 32", "IBAN: {}"),
    ("card", "4111.1111.1111.1111", "Card {} expires 09/27."),
    ("card", "4111-1111-1111-1111", "Card {} expires 09/27."),
    ("card", "3782 822463 10005", "Amex {} on file."),
    ("email", "josé.garcía@ejemplo.es", "Write to {} today."),
    ("email", "анна@пример.рф", "Write to {} today."),
    ("email", "प्रिया@उदाहरण.भारत", "Write to {} today."),
    ("email", "info@xn--bcher-kva.de", "Write to {} today."),
    ("email", "Maria.Garcia@Example.COM", "Write to {} today."),
    # issue 47: obfuscated addresses (a bracketed "at" is needed; plain prose is not one)
    ("email", "jane.doe(at)example(dot)com", "Write to {} today."),
    ("email", "jane [at] example [dot] com", "Write to {} today."),
    ("email", "Jane.Doe [AT] mail.example [DOT] org", "Contact: {}."),
    ("email", "jane(at)example.co.uk", "Write to {} today."),
    ("email", "jane {at} example {dot} com", "Write to {} today."),
    # issue 47: zero-padded IPv4
    ("ip", "192.168.001.010", "Blocked {} at the edge."),
    ("ip", "010.000.000.001", "Gateway {} is down."),
]


@pytest.mark.parametrize(("kind", "value", "template"), SHAPES)
def test_each_shape_is_found_exactly(kind, value, template):
    text = template.format(value)
    assert [(s.kind, s.text) for s in detect(text)] == [(kind, value)]


@pytest.mark.parametrize("text", [
    "Annual Leave Policy\nPlease read the Quarterly Business Review before Monday, March 4.",
    "Our Kuala Lumpur team moved to Microsoft Teams in June; see the Remote Travel Checklist.",
    "Yesterday Finance closed the books. Tomorrow Legal reviews the Data Retention Schedule.",
    "Flights to Buenos Aires and São Paulo leave on Friday from the Rio de Janeiro office.",
    "Order 4820193746 shipped on 20240501; PO 4500012345, EAN 4006381333931, ts 1714557600.",
    "Please call about order 4820193746 dated 01.05.2024; version 10.4.2.7, build 2024.5.1.1234.",
    "The total was 1,250,000.00 and the tracking number is 4151666357058244.",
    "Reference de12 3456 7890 1234 5678 90 fails its check; so does 4111.1111.1111.1112.",
    "Pi is 3.14159265358979 and the old card 5504 0660 1684 3346 was cancelled.",
    "Version 2.3.1 of Visual Studio Code; Google Drive sync; Power BI dashboard.",
    "Look at example dot com for details; we arrived at noon and left at five.",
    "Sales at example (dot) com rose; the team met (at) the office to discuss it.",
    "The gateway runs version 010.020.030.040 since May.",
])
def test_hard_negatives_are_left_alone(text):
    assert detect(text) == []


def test_spans_point_at_the_original_text():
    # fullwidth digits, a zero-width space and a soft hyphen are matched, not rewritten
    text = "Card ４１１１ １１１１ １１１１ １１１１, phone 415\u200b555\u00ad0134 (mobile), Ｊosé\u0301."
    spans = detect(text)
    assert [s.kind for s in spans] == ["card", "phone"]
    assert spans[0].text == "４１１１ １１１１ １１１１ １１１１"
    assert spans[1].text == "415\u200b555\u00ad0134"
    r = Redaction()
    assert r.restore(r.redact(text)) == text


def test_the_issue_examples_never_reach_the_third_party(api, claude, settings):
    values = ["Siobhan Ní Bhriain", "Иван Петров", "Xochitl Quispe", "4155550134",
              "de89 3704 0044 0532 0130 00", "4111.1111.1111.1111", "josé.garcía@ejemplo.es"]
    # one sentence: the mock server answers with the first sentence of the message
    doc = (f"Signed by {values[0]}; {values[1]} approved it; ask {values[2]} (call {values[3]}); "
           f"refund to iban {values[4]}, card {values[5]}, receipt to {values[6]}.")
    chunk = Chunk("c1", "d1", "lease.md", doc, 0, 0, len(doc), "h", "v")
    gen = redacting.wrap(claude, settings)
    text, _ = asyncio.run(collect(gen, build_messages("Who signed?", [chunk], "heavy"),
                                  max_tokens=256))
    wire = json.dumps([r["body"] for r in api.requests], ensure_ascii=False)
    for value in values:
        for form in {value, value.replace(" ", "").upper(), re.sub(r"\D", "", value)} - {""}:
            assert form not in wire, form
    for word in ("Siobhan", "Bhriain", "Петров", "Quispe", "josé"):
        assert word not in wire
    assert text.startswith(doc)  # the reply had placeholders; the caller sees the values


def _list_words():
    return (GIVEN_NAMES | STOP_WORDS | NOT_PERSON | PLACE_STARTERS | TITLES | GREETINGS)


def test_the_evaluation_people_are_held_out():
    """No word of an evaluated person is in any detector list (particles aside), and no word
    of the unlisted look-alikes is either: the figures are on unseen text."""
    lists = _list_words()
    for given, surnames, _ in PEOPLE.values():
        for name in given + surnames:
            for word in name.split():  # a hyphenated or apostrophe name is one word
                assert word in PARTICLES or word not in lists, word
    for phrase in UNLISTED:
        assert not set(phrase.split()) & lists, phrase


def test_name_recall_holds_in_every_tradition():
    """No script or naming tradition is left behind: each is found in cue-less sentences."""
    for tradition, (given, surnames, family_first) in PEOPLE.items():
        found = 0
        for g in given:
            for s in surnames:
                name = f"{s} {g}" if family_first else f"{g} {s}"
                found += any(sp.kind == "name" and sp.text == name
                             for sp in detect(f"Please forward it to {name} and the team."))
        assert found / (len(given) * len(surnames)) >= 0.9, tradition


def test_targets_on_a_second_seed():
    scores = evaluate(generate(1500, seed=7))
    for kind in ("email", "iban", "card", "ssn", "ip", "phone"):
        assert scores[kind]["recall"] >= 0.98 and scores[kind]["precision"] >= 0.95, (kind, scores)
    assert scores["name"]["recall"] >= 0.90 and scores["name"]["precision"] >= 0.80, scores
