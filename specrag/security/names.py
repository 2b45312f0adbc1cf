"""Offline data for the built-in person-name detector: common given names and cue words.

Given names were chosen to be common across English, Spanish, Portuguese, French,
German, Italian, Dutch, Polish, Indian, Chinese, Arabic and African usage, and to
*exclude* names that are also everyday English words (Will, May, June, Mark, Grace,
Hope, Bill, Frank, Rose, Summer, Chase, ...): a bare "Will" is far more often a verb
than a person, so those names are only found with a title ("Mr Will Smith").

Deliberately not here: surnames (any capitalised word after a given name counts) and
the matching itself (``pii``).
"""

from __future__ import annotations

GIVEN_NAMES = frozenset("""
Aaron Abdul Abigail Adam Adrian Ahmed Aisha Alan Albert Alejandro Alessandro Alex Alexander
Alexandra Ali Alice Alicia Alison Amanda Amelia Amir Amy Ana Andrea Andreas Andrew Angela
Anil Anita Anna Anne Anthony Antonio Arjun Arthur Ashley Barbara Beatriz Benjamin Bernard
Brian Bruno Camila Carla Carlos Carmen Caroline Catherine Charles Charlotte Chen Chloe
Christian Christina Christine Christopher Claire Claudia Daniel Daniela David Deborah Deepak
Diana Diego Dmitri Dorothy Edward Elena Elizabeth Emily Emma Eric Erik Fatima Felipe
Fernando Francesca Francisco Gabriel Gabriela George Giovanni Giulia Greta Gregory Hannah
Hans Hassan Heather Helen Henrik Hiroshi Hugo Ibrahim Igor Ingrid Isabel Isabella Ivan
Jacob James Jan Jane Janet Jasmine Jason Javier Jennifer Jessica Joanna Johan John Jonathan
Jorge Jose Joseph Joshua Juan Julia Julian Karen Karim Katarzyna Katherine Kenji Kevin
Klaus Kumar Laura Lauren Leonardo Li Linda Lisa Lorenzo Lucas Lucia Luis Luisa Lukas
Magdalena Manuel Marco Margaret Maria Marie Marta Martin Mary Matteo Matthew Mehmet Melissa
Michael Michelle Miguel Mohamed Mohammed Monica Nadia Natalia Nathan Nicholas Nicole Nina
Olga Oliver Olivia Omar Pablo Patricia Paul Paula Pedro Peter Pierre Pietro Priya Rachel
Rafael Rahul Rajesh Raul Rebecca Ricardo Richard Robert Roberto Ronald Samuel Sandra Santiago
Sarah Sebastian Sergei Sergio Simon Sofia Sophie Stefan Stephanie Steven Susan Sven Tatiana
Thomas Timothy Tomasz Valentina Vanessa Victor Victoria Vikram Wei Wojciech Yuki Yusuf
Zhang Zoe
""".split())

TITLES = ("Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Professor", "Sir", "Dame")

# Words before a bare given name that make it a person ("Dear Maria", "ask Priya").
CUES = ("Dear", "Hi", "Hello", "Thanks", "Regards", "contact", "Contact", "ask", "Ask",
        "call", "Call", "email", "Email", "cc", "CC", "from", "by", "with", "to", "and")

# Capitalised words that follow a given name without being a surname.
NOT_SURNAMES = frozenset("""
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April
June July August September October November December The This That These Those And Or But
If In On At For From With To By Of As Is Are Was Were Will Can May Street Road Avenue
Lane Drive Square Inc Ltd LLC GmbH Team Department Office University Hospital Bank
""".split())

# Capitalised words after a cue ("Dear Team", "contact Support") that are not people.
NOT_NAMES = frozenset("""
Team All Everyone Colleagues Friends Support Sales Customer Customers Service Services Sir
Madam Finance Legal Security Admin Billing Accounts Operations Management Staff Member
Members Partner Partners Us Me You Him Her Them It Our Your Their Please Thanks Regards
""".split())
