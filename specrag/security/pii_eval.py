"""A generated PII test set with realistic surrounding text, and precision/recall per kind.

``generate(n, seed)`` writes ``n`` short business texts (support tickets, HR notes,
payment instructions, server logs) with valid values of every kind (Luhn-correct
cards, mod-97-correct IBANs, issuable SSNs ...) at known offsets, mixed with
look-alikes that must *not* be redacted: cards failing Luhn, IBANs with a wrong check,
order numbers, dates, times, version strings, ISBNs, prices, and everyday words that
are also given names. Half of the people have given names outside the detector's
list, so name recall is measured on names it has never seen.

``evaluate(samples)`` scores ``pii.detect``: a predicted span counts when it overlaps
a gold span of the same kind. ``python -m specrag.security.pii_eval`` prints the table.

Deliberately not here: the detector (``pii``).
"""

from __future__ import annotations

import random
import string
import sys
from collections import Counter

from specrag.security.pii import KINDS, detect, luhn_ok

KNOWN_GIVEN = ["Maria", "John", "Priya", "Wei", "Fatima", "Lukas", "Sofia", "Ahmed", "Elena",
               "Carlos", "Yuki", "Olivia", "Rajesh", "Anna", "Pierre", "Katarzyna"]
UNSEEN_GIVEN = ["Oluwaseun", "Thandiwe", "Saoirse", "Bartholomew", "Ngozi", "Keanu", "Aurelio",
                "Siobhan", "Tadeusz", "Ximena", "Eluned", "Baptiste", "Kwame", "Leilani",
                "Radek", "Ines"]
SURNAMES = ["Garcia", "Smith", "Sharma", "Zhang", "Haddad", "Becker", "Rossi", "Nowak", "Okafor",
            "Dubois", "Tanaka", "O'Brien", "Fernandes", "Kowalski", "Van der Berg", "Nkosi",
            "Murphy", "Jensen", "Petrov", "Ali"]
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
]


def _digits(rng, n):
    return "".join(rng.choice(string.digits) for _ in range(n))


def _card(rng):
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("37", 15), ("6011", 16)])
    body = prefix + _digits(rng, length - len(prefix) - 1)
    check = next(d for d in string.digits if luhn_ok(body + d))
    digits = body + check
    sep = rng.choice([" ", "-", ""])
    groups = [digits[i:i + 4] for i in range(0, len(digits), 4)] if length == 16 else \
        [digits[:4], digits[4:10], digits[10:]]
    return sep.join(groups)


def _bad_card(rng):
    good = _card(rng).replace(" ", "").replace("-", "")
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
    return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4)) \
        if rng.random() < 0.7 else compact


def _phone(rng):
    d = lambda n: _digits(rng, n)  # noqa: E731
    return rng.choice([f"({rng.randint(201, 989)}) {rng.randint(200, 999)}-{d(4)}",
                       f"{rng.randint(201, 989)}-{rng.randint(200, 999)}-{d(4)}",
                       f"+1 {rng.randint(201, 989)} {rng.randint(200, 999)} {d(4)}",
                       f"+44 20 {d(4)} {d(4)}", f"020 {d(4)} {d(4)}",
                       f"+49 30 {d(8)}", f"+33 1 {d(2)} {d(2)} {d(2)} {d(2)}",
                       f"+91 {rng.randint(70000, 99999)} {d(5)}",
                       f"{rng.randint(201, 989)}.{rng.randint(200, 999)}.{d(4)}",
                       f"+44 (0)20 {d(4)} {d(4)}", f"07700 {d(6)}"])


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


def _name(rng):
    given = rng.choice(KNOWN_GIVEN if rng.random() < 0.5 else UNSEEN_GIVEN)
    return f"{given} {rng.choice(SURNAMES)}" if rng.random() < 0.85 else given


def _email(rng):
    first, last = rng.choice(KNOWN_GIVEN + UNSEEN_GIVEN), rng.choice(SURNAMES)
    local = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}"])
    return local.lower().replace("'", "").replace(" ", "") + "@" + rng.choice(DOMAINS)


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
    }[what]()


_MAKERS = {"wordname": _wordname, "email": _email, "iban": _iban, "card": _card, "ssn": _ssn,
           "ip": _ip, "phone": _phone, "name": _name}


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
                gold.append((pos, pos + len(value), "name" if field == "wordname" else field))
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
