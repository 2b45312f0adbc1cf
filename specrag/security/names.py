"""Offline data for the person-name detector: given names, titles, cue words, particles.

Given names are one signal among several (``name_finder``): a listed given name makes
a lone capitalised word after a weak cue ("to Maria", "and Priya") a person. They were
chosen to be common across many languages and scripts, and to *exclude* names that are
also everyday English words (Will, May, June, Mark, Grace, Hope, Bill, Frank, Rose, ...):
a bare "Will" is far more often a verb than a person. The evaluation's people
(``pii_eval_data``) are deliberately absent, so measured recall is on unseen names.

Deliberately not here: surnames (any capitalised word after a given name counts),
capitalised words that are not names (``common_words``) and the matching itself.
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
Aarav Aditya Amit Anjali Deepika Divya Ganesh Gaurav Kavita Krishna Manish Neha Pooja Rohan
Sanjay Shreya Sunita Suresh Vijay Ahmad Amina Farah Hamza Hussein Mariam Mustafa Nour Salma
Samir Youssef Zainab Jing Jun Lei Ling Ming Xin Yan Yong Hui Jie Tao Akira Haruki Kaito Yui
Aiko Daiki Takeshi Yumi Jisoo Hyun Minho Jiwoo Aleksandr Andrei Boris Irina Mikhail Natasha
Pavel Svetlana Vladimir Yulia Alejandra Andrés Catalina Cristina Fernanda Guillermo Joaquín
Lucía Mateo Rodrigo Valeria Ximena Adebayo Amara Ayodele Chinedu Emeka Folake Kemi Nnamdi
Tendai Zanele Aisling Cian Eoin Seán Sinéad Dylan Gareth Rhys Sian Astrid Freya Lars Magnus
Nils Sigrid Ayşe Emre Elif Zeynep Agnieszka Krzysztof Piotr Marek Zofia Anh Duc Linh Quang
Tuan Avi Noa Yael Yosef Dariush Farhad Parisa Reza Shirin
Андрей Мария Елена Михаил Татьяна Юлия Александр Павел Μαρία Γιάννης Κώστας Αθηνά
""".split())

# before a name, with or without a dot: "Dr. Quispe", "Frau Ní Bhriain", "Sra. Mamani"
TITLES = frozenset("""
Mr Mrs Ms Miss Mx Mister Madam Dr Doctor Prof Professor Sir Dame Lady Lord Rev Fr Hon
Judge Justice Capt Captain Col Sgt Nurse Officer Sr Sra Srta Señor Señora Señorita Don Doña
Herr Frau Monsieur Madame Mme Mlle Signor Signora Sig Dott Pan Pani Sheikh Shri Smt Sri
Господин Госпожа
""".split())

# greetings and sign-offs: the next words are a person even when they are also common
# words ("Dear Grace,"), or written in a script without capitals ("Dear 王伟")
GREETINGS = frozenset("""
Dear Hi Hello Hey Greetings Attn Estimado Estimada Querido Querida Liebe Lieber Cher Chère
Caro Cara Bonjour Hola Hallo Olá Ciao Уважаемый Уважаемая Привет
""".split())

# words before a name that make it a person (case-insensitive, a ':' or ',' may follow):
# roles, verbs of contact, and "X by" / "X with" phrases
PERSON_CUES = (
    "contact", "contact person", "ask", "reach", "call", "email", "e-mail", "ping", "cc", "bcc",
    "from:", "to:", "attn", "name", "full name", "customer", "client", "patient", "employee",
    "applicant", "tenant", "beneficiary", "account holder", "cardholder", "passenger", "guest",
    "candidate", "colleague", "manager", "owner", "assignee", "reporter", "recipient",
    "sender", "author", "signatory", "payee", "spoke with", "met with", "meeting with",
    "speak to", "talk to", "thanks to", "thank", "thanks", "congratulations", "welcome",
    "on behalf of", "per", "told", "asked", "invited", "hired", "introducing", "meet",
    "signed by", "approved by", "reviewed by", "written by", "prepared by", "submitted by",
    "authorised by", "authorized by", "requested by", "countersigned by", "sent by",
    "assigned to", "forward to", "forwarded to", "escalated to", "reported by",
)

# after a single capitalised word: "Quispe approved", "Xochitl said"
PERSON_VERBS = (
    "said", "says", "wrote", "writes", "asked", "asks", "approved", "approves", "signed",
    "joined", "called", "phoned", "emailed", "confirmed", "requested", "reported", "replied",
    "agreed", "noted", "explained", "mentioned", "added", "submitted", "flagged", "thanked",
    "resigned", "complained", "insisted", "suggested", "recommended", "promised", "told",
    "argued", "warned", "admitted", "declined", "accepted", "apologised", "apologized",
)

# given names are found with these before them too (weaker cues than PERSON_CUES)
WEAK_CUES = ("with", "and", "or", "&", "for", "by", "from", "to")

# lower-case words inside a name: "Annelies van der Meer", "Noura bint Khalid"
PARTICLES = frozenset("""
van der den de del della dei di da das dos du des la le los las von zu ter ten bin binti
bint ibn al el y ap ab
""".split())
