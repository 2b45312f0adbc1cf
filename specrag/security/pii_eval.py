"""A generated PII test set with realistic surrounding text, and precision/recall per kind.

``generate(n, seed)`` writes ``n`` short business texts (support tickets, HR notes,
payment instructions, server logs, signatures) with valid values of every kind at
known offsets, in the shapes people type: Luhn-correct cards grouped by spaces, dots,
dashes or not at all; mod-97-correct IBANs in upper or lower case, spaced or compact;
phones with or without ``+``, parentheses and separators, 10-15 digits in a row;
addresses with Unicode local parts and internationalised domains. People come from
``pii_eval_data``: many traditions and scripts, none in the detector's lists, so name
recall is measured on names it has never seen. Mixed in are look-alikes that must *not*
be redacted: cards failing Luhn, IBANs with a wrong check, order and PO numbers,
timestamps, dates, versions, ISBNs, EANs, prices; and for names, headings ("Annual Leave
Policy"), places, products, months, weekdays and capitalised sentence starts.

``evaluate(samples)`` scores ``pii.detect``: a predicted span counts when it overlaps
a gold span of the same kind. ``python -m specrag.security.pii_eval [N]`` prints the table.

Deliberately not here: the detector (``pii``), the held-out vocabulary (``pii_eval_data``).
"""

from __future__ import annotations

import random
import string
import sys
from collections import Counter

from specrag.security.pii import KINDS, detect, luhn_ok
from specrag.security.pii_eval_data import (
    HEADING_WORDS,
    IDN_DOMAINS,
    MONTHS,
    PEOPLE,
    PLACES,
    PRODUCTS,
    SENTENCE_STARTS,
    UNICODE_LOCALS,
    UNLISTED,
    WEEKDAYS,
)

SURNAMES = ["Garcia", "Smith", "Sharma", "Zhang", "Haddad", "Becker", "Rossi", "Nowak", "Okafor",
            "Dubois", "Tanaka", "O'Brien", "Fernandes", "Kowalski", "Van der Berg", "Nkosi"]
DOMAINS = ["example.com", "acme-corp.co.uk", "mail.example.org", "uni-heidelberg.de"]

# {kind} is filled with a PII value, {_what} with a look-alike that is not PII
TEMPLATES = [
    "Hi team, please reach {name} at {email} if the invoice for order {_order} is late.",
    "Dear {name}, your refund of ${_price} was sent to IBAN {iban} on {_date}.",
    "Customer {name} called from {phone} about card {card}; ticket {_ticket} stays open.",
    "HR note: {name} (SSN {ssn}) starts on {_date}; laptop tag {_asset}.",
    "Login failures from {ip} at {_time}; the gateway runs version {_version}.",
    "For urgent issues call {phone} or email {email}; office hours are 9:00-17:00.",
    "Payment instructions: beneficiary {name}, IBAN {iban}, reference {_badiban}.",
    "The card {card} was declined; the test number {_badcard} is not a real card.",
    "Dr. {name} reviewed the case and copied {email} on the reply.",
    "Please ask {name} to check the firewall rule for {ip} before {_date}.",
    "Social security number: {ssn}. Employee ID {_empid}, cost centre {_zip}.",
    "Will the May report cover the New York office? See ISBN {_isbn} for the method.",
    "Shipping to Room {_room}, building {_zip}; contact {name} on {phone}.",
    "Audit log: user {email} connected from {ip} and downloaded {_qty} files.",
    "Wire the deposit to {iban} and send the receipt to {email} within {_qty} days.",
    "Signed by {name}, Finance Department, on {_date}.",
    # harder: no cue before the name, names that are also words, IDs that pass Luhn
    "Thanks to {name} for the help with the migration of {_qty} mailboxes.",
    "{name} approved the budget on {_date}; the tracking number is {_order16}.",
    "{wordname} and {name} joined the on-call rota this week.",
    "Reach me at {phone} (mobile) or on Teams; my backup is at {ip}.",
    # shapes: compact and international phones, lower-case IBANs, dotted cards, IDN mail
    "Mobile: {phone}. Please call {phone} about order {_order10}, not the PO {_po}.",
    "Tel. {phone} / fax {phone}; invoice {_invoice} of {_amount} is due {_datedots}.",
    "WhatsApp or text {phone} if the {_product} login fails again.",
    "Refund to iban {iban} (not {_badiban}); card on file {card}.",
    "Bank details for {fullname}: {iban}. The EAN {_ean} batch ships {_datecompact}.",
    "Card number {card}, expiry 09/27; the old card {_badcard} was cancelled.",
    "Write to {email} or {email}; the export ran at {_timestamp} (build {_build}).",
    "From: {fullname} <{email}>\nSubject: {_heading} ({phonesep})",
    "Regards,\n{fullname}\n{_heading} lead | {phonesep} | {email}",
    "Emergency contact: {name} ({phone}); SSN {ssn}; tracking {_tracking}.",
    "W-2 for {fullname}: social security number {ssn}, employer ID {_empid}, {_amount}.",
    # people in varied sentences; the capitalised phrases around them are not people
    "Meeting notes: {fullname} will present the {_heading} on {_weekday} {_day} {_month}.",
    "{fullname} said the {_product} rollout in {_place} is on track.",
    "Flights for {fullname} to {_place} are booked for {_month} {_day}.",
    "Please forward the {_heading} to {fullname} and {fullname}.",
    "I spoke with {name} yesterday about the {_place} office move.",
    "Interview panel: {fullname}, {fullname} and {fullname}.",
    "According to {fullname}, the {_product} licence expires in {_month}.",
    "Invoice approved by {name} (cost centre {_zip}); see the {_heading}.",
    "The visa application for {fullname} was approved by the {_place} consulate.",
    "Patient {name}, seen on {_weekday}, was referred to the {_place} clinic.",
    "Estimado {name}, su pedido {_order} fue enviado. Sehr geehrte Frau {fullname}.",
    "{fullname} from accounting flagged a duplicate {_product} payment.",
    # hard negatives only: nothing here is personal data
    "{_heading}\n{_sentstart} the {_heading} before {_weekday}, {_month} {_day}.",
    "Our {_place} team moved to {_product} in {_month}; {_sentstart} the {_heading}.",
    "{_weekday} {_day} {_month}: the {_place} and {_place} offices close at {_time}.",
    "{_product} release {_version} fixes ticket {_ticket}; order {_order10} shipped {_datedots}.",
    "Photos from {_unlisted} are in the shared folder; {_unlisted} tickets sold out in {_month}.",
    "We compared {_unlisted} and {_unlisted} for the offsite. {_unlisted} won.",
]


def _digits(rng, n):
    return "".join(rng.choice(string.digits) for _ in range(n))


def _card(rng):
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("37", 15), ("6011", 16)])
    body = prefix + _digits(rng, length - len(prefix) - 1)
    check = next(d for d in string.digits if luhn_ok(body + d))
    digits = body + check
    sep = rng.choice([" ", "-", "", "."])
    groups = [digits[i:i + 4] for i in range(0, len(digits), 4)] if length == 16 else \
        [digits[:4], digits[4:10], digits[10:]]
    return sep.join(groups)


def _bad_card(rng):
    good = _card(rng)
    return good[:-1] + str((int(good[-1]) + 1) % 10)


def _iban(rng, valid=True):
    country, bban = rng.choice([("DE", _digits(rng, 18)), ("FR", _digits(rng, 23)),
                                ("NL", "ABNA" + _digits(rng, 10)), ("ES", _digits(rng, 20)),
                                ("GB", "WEST" + _digits(rng, 14)), ("IT", "X" + _digits(rng, 22)),
                                ("BE", _digits(rng, 12))])
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in moved)) % 97
    if not valid:
        check = (check + rng.randint(1, 50)) % 97 + 2
    compact = f"{country}{check:02d}{bban}"
    shown = " ".join(compact[i:i + 4] for i in range(0, len(compact), 4)) \
        if rng.random() < 0.6 else compact
    return shown.lower() if rng.random() < 0.25 else shown


def _phone(rng, compact=True):
    """A phone number; ``compact=False`` only shapes with ``+`` or separators, for texts
    where no word says it is a phone (a bare digit run there is not one)."""
    d = lambda n: _digits(rng, n)  # noqa: E731
    area, exch = rng.randint(201, 989), rng.randint(200, 999)
    shapes = [f"({area}) {exch}-{d(4)}", f"{area}-{exch}-{d(4)}", f"+1 {area} {exch} {d(4)}",
              f"+44 20 {d(4)} {d(4)}", f"020 {d(4)} {d(4)}", f"+49 30 {d(8)}",
              f"+33 1 {d(2)} {d(2)} {d(2)} {d(2)}", f"+91 {rng.randint(70000, 99999)} {d(5)}",
              f"{area}.{exch}.{d(4)}", f"+44 (0)20 {d(4)} {d(4)}", f"07700 {d(6)}",
              f"+1{area}{exch}{d(4)}", f"+447700{d(6)}", f"0044 20 {d(4)} {d(4)}",
              f"+91-{rng.randint(70000, 99999)}-{d(5)}", f"1-800-{exch}-{d(4)}",
              f"+49 (30) {d(4)} {d(4)}", f"+81 3-{d(4)}-{d(4)}", f"+55 11 9{d(4)}-{d(4)}",
              f"+44.20.{d(4)}.{d(4)}", f"{area} {exch} {d(4)}"]
    if compact:  # digits only: 10-15 in a row, found by the words around them
        shapes += [f"{area}{exch}{d(4)}", f"({area}){exch}{d(4)}", f"07700{d(6)}",
                   f"0049{d(10)}", f"{d(1)}{area}{exch}{d(4)}"]
    return rng.choice(shapes)


def _ssn(rng):
    area = rng.choice([rng.randint(1, 665), rng.randint(667, 899)])
    sep = "-" if rng.random() < 0.8 else " "
    return f"{area:03d}{sep}{rng.randint(1, 99):02d}{sep}{rng.randint(1, 9999):04d}"


def _wordname(rng):
    # given names that are also English words: the detector leaves them alone without a title
    return f"{rng.choice(['Will', 'May', 'June', 'Mark', 'Grace', 'Bill'])} {rng.choice(SURNAMES)}"


def _ip(rng):
    if rng.random() < 0.75:
        return ".".join(str(rng.randint(1, 254)) for _ in range(4))
    groups = [f"{rng.randint(0, 65535):x}" for _ in range(8)]
    return rng.choice([":".join(groups), f"2001:db8::{groups[0]}:{groups[1]}",
                       f"fe80::{groups[2]}"])


def _fullname(rng):
    given, surnames, family_first = PEOPLE[rng.choice(sorted(PEOPLE))]
    first, last = rng.choice(given), rng.choice(surnames)
    return f"{last} {first}" if family_first else f"{first} {last}"


def _name(rng):
    """A full name, or (one time in seven) the given name alone."""
    if rng.random() < 0.85:
        return _fullname(rng)
    return rng.choice(PEOPLE[rng.choice(sorted(PEOPLE))][0])


def _email(rng):
    if rng.random() < 0.3:  # internationalised: Unicode local part and/or IDN domain
        local = rng.choice(UNICODE_LOCALS + ["info", "m.garcia"])
        return f"{local}@{rng.choice(IDN_DOMAINS)}"
    first = rng.choice(PEOPLE[rng.choice(sorted(PEOPLE))][0])
    last = rng.choice(SURNAMES)
    local = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}"])
    local = local.replace("'", "").replace(" ", "")
    address = local + "@" + rng.choice(DOMAINS)
    return address if rng.random() < 0.2 else address.lower()  # Maria.Garcia@Example.com too


def _heading(rng):
    return " ".join(rng.choice(words) for words in HEADING_WORDS)


def _other(rng, what):
    n, d = rng.randint, lambda k: _digits(rng, k)
    return {
        "order": lambda: f"ORD-{d(8)}", "price": lambda: f"{n(10, 9999)}.{d(2)}",
        "date": lambda: f"2024-{n(1, 12):02d}-{n(1, 28):02d}",
        "time": lambda: f"{n(0, 23):02d}:{n(0, 59):02d}:{n(0, 59):02d}",
        "version": lambda: f"{n(1, 9)}.{n(0, 20)}.{n(0, 9)}.{n(0, 99)}",
        "ticket": lambda: f"#{d(6)}", "asset": lambda: f"LT-{d(5)}",
        "badiban": lambda: _iban(rng, valid=False), "badcard": lambda: _bad_card(rng),
        "empid": lambda: f"E{d(7)}", "zip": lambda: d(5),
        "isbn": lambda: f"978-{n(0, 9)}-{d(3)}-{d(5)}-{n(0, 9)}",
        "room": lambda: d(4), "qty": lambda: str(n(2, 500)),
        "order16": lambda: "4" + d(15),  # passes Luhn one time in ten
        # digit runs of phone length that are not phones
        "order10": lambda: str(n(1, 9)) + d(9), "po": lambda: "45" + d(8),
        "timestamp": lambda: f"17{d(8)}", "datecompact": lambda: f"2024{n(1, 12):02d}{n(1, 28):02d}",
        "datedots": lambda: f"{n(1, 28):02d}.{n(1, 12):02d}.2024", "ean": lambda: "40" + d(11),
        "invoice": lambda: f"INV-2024-{d(6)}", "amount": lambda: f"{n(1, 999)},{d(3)},{d(3)}.{d(2)}",
        "build": lambda: f"2024.{n(1, 12)}.{n(1, 28)}.{d(4)}", "tracking": lambda: "9400" + d(18),
        # capitalised phrases that are not people
        "heading": lambda: _heading(rng), "place": lambda: rng.choice(PLACES),
        "product": lambda: rng.choice(PRODUCTS), "unlisted": lambda: rng.choice(UNLISTED), "month": lambda: rng.choice(MONTHS),
        "weekday": lambda: rng.choice(WEEKDAYS), "day": lambda: str(n(1, 28)),
        "sentstart": lambda: rng.choice(SENTENCE_STARTS),
    }[what]()


_MAKERS = {"wordname": _wordname, "email": _email, "iban": _iban, "card": _card, "ssn": _ssn,
           "ip": _ip, "phone": _phone, "phonesep": lambda rng: _phone(rng, compact=False),
           "name": _name, "fullname": _fullname}
_GOLD_KIND = {"wordname": "name", "fullname": "name", "phonesep": "phone"}


def generate(n: int = 1000, seed: int = 0) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """``n`` texts with their gold spans ``(start, end, kind)``."""
    rng = random.Random(seed)
    samples = []
    for _ in range(n):
        template = rng.choice(TEMPLATES)
        text, gold, pos = [], [], 0
        for literal, field, _, _ in string.Formatter().parse(template):
            text.append(literal)
            pos += len(literal)
            if field is None:
                continue
            if field.startswith("_"):
                value = _other(rng, field[1:])
            else:
                value = _MAKERS[field](rng)
                gold.append((pos, pos + len(value), _GOLD_KIND.get(field, field)))
            text.append(value)
            pos += len(value)
        samples.append(("".join(text), gold))
    return samples


def evaluate(samples, kinds=KINDS) -> dict[str, dict[str, float]]:
    tp_pred, tp_gold, n_pred, n_gold = Counter(), Counter(), Counter(), Counter()
    for text, gold in samples:
        pred = detect(text, kinds)
        for p in pred:
            n_pred[p.kind] += 1
            tp_pred[p.kind] += any(g[2] == p.kind and p.start < g[1] and g[0] < p.end for g in gold)
        for g in gold:
            n_gold[g[2]] += 1
            tp_gold[g[2]] += any(p.kind == g[2] and p.start < g[1] and g[0] < p.end for p in pred)
    out = {}
    for k in kinds:
        p = tp_pred[k] / n_pred[k] if n_pred[k] else 1.0
        r = tp_gold[k] / n_gold[k] if n_gold[k] else 1.0
        out[k] = {"precision": p, "recall": r, "gold": n_gold[k], "predicted": n_pred[k]}
    return out


def main(argv: list[str] | None = None) -> int:
    n = int((argv or sys.argv[1:] or ["2000"])[0])
    scores = evaluate(generate(n))
    print(f"{'kind':<6} {'precision':>9} {'recall':>7} {'gold':>6} {'predicted':>9}")
    for kind, s in scores.items():
        print(f"{kind:<6} {s['precision']:>9.3f} {s['recall']:>7.3f} {s['gold']:>6} "
              f"{s['predicted']:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
