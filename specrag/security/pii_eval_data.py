"""Held-out vocabulary for the generated PII set: people of many traditions, and look-alikes.

``PEOPLE`` holds given names and surnames per naming tradition, in the scripts people
write them in (Irish with fadas, Cyrillic, Greek, Nahuatl and Quechua, pinyin, Arabic
and Indian transliterations, Vietnamese, names with particles, hyphens and
apostrophes). None of their words is in the detector's lists (``names``,
``common_words``); ``tests/test_security_pii_shapes.py`` checks that, so name recall is
measured on names the detector has never seen. ``PLACES``, ``PRODUCTS`` and the
heading words are the hard negatives for name precision: capitalised phrases that are
not people. Most of their words are in the detector's stop-lists (that is what the
lists are for); ``UNLISTED`` are not, and show what the heuristic does with capitalised
phrases it has never seen.

Deliberately not here: the texts, the other kinds' values and the scoring (``pii_eval``).
"""

from __future__ import annotations

# tradition: (given names, surnames, family name first?)
PEOPLE = {
    "irish": ("Siobhán Aoife Caoimhe Pádraig Niamh Oisín Tadhg Ciarán Róisín Éanna".split(),
              ["Ní Bhriain", "Ó Súilleabháin", "Nic Aodha", "Ó Conaill", "Mac Giolla Phádraig",
               "O'Sullivan", "Ní Dhomhnaill", "Mac Cárthaigh"], False),
    "russian": ("Иван Наталья Дмитрий Ольга Сергей Анастасия Алексей Екатерина".split(),
                "Петров Смирнова Кузнецов Васильева Иванов Соколова Попов Морозова".split(),
                False),
    "greek": ("Γιώργος Ελένη Δημήτρης Κατερίνα Νίκος Σοφία".split(),
              "Παπαδόπουλος Νικολάου Οικονόμου Γεωργίου Παππάς Αντωνίου".split(), False),
    "andean": ("Xochitl Citlali Yupanqui Cuauhtémoc Nayeli Tupac Illari Amaru Quilla".split(),
               "Quispe Mamani Condori Huamán Choque Apaza Huanca Ccama".split(), False),
    "pinyin": ("Xiuying Jiahui Zihan Mingyu Xiaoling Haoran Yuxuan Shufen".split(),
               "Zhou Liu Huang Xu Guo Lin Sun Ma".split(), True),
    "arabic": ("Abdulrahman Noura Yousef Khadija Layla Tariq Mahmoud Rania".split(),
               ["Al-Farsi", "bint Khalid", "ibn Rashid", "El-Amrani", "Al Mansouri",
                "Abdel-Aziz", "Haddadin", "Abu Samra"], False),
    "indian": ("Aishwarya Siddharth Ananya Lakshmi Vivek Meenakshi Harpreet Sanjana".split(),
               "Chaturvedi Venkataraman Iyer Raghunathan Deshpande Sundaram Kaur "
               "Bhattacharya".split(), False),
    "vietnamese": ("Hương Minh Bảo Thu Nam Lan Phúc".split(),
                   ["Nguyễn Thị", "Trần Văn", "Phạm Quốc", "Lê Thị", "Đặng Hoàng", "Võ Minh"],
                   True),
    "dutch": ("Annelies Joost Gijs Femke Maarten Sanne".split(),
              ["van der Meer", "de Vries", "van den Broek", "van Dijk", "ter Horst", "de Jong"],
              False),
    "spanish": ("Inmaculada Guadalupe Teodoro Remedios Fermín Itziar".split(),
                ["de la Fuente", "de los Santos", "del Valle", "de la Cruz", "Goikoetxea",
                 "Ibáñez"], False),
    "particles": ("Ludwig Letizia Conceição Amadou Ottilie Gianluca".split(),
                  ["von Hohenberg", "di Stefano", "dos Reis", "da Silva", "zu Stolberg",
                   "Dell'Acqua"], False),
    "hyphenated": ("Maëlle Ségolène Björn Ngaio Iolanthe Oluwaseun Jean-Baptiste".split(),
                   ["Le Goff", "D'Aubigné", "O'Donoghue-Lindqvist", "Te Whare", "Smythe-Baird",
                    "Adeyemi-Bakare"], False),
    "african": ("Thandiwe Chidinma Wanjiru Abebe Kofi Ngozi Kwame".split(),
                "Nkosi Okonkwo Kamau Bekele Mensah-Bonsu Eze Owusu".split(), False),
    "european": ("Zdzisław Małgorzata Bożena Jiří Gülşen Çağla Zsófia Søren Åsa Þóra".split(),
                 "Wójcik Szymańska Dvořáková Novotný Yıldırım Öztürk Kovács Lindström "
                 "Sigurðardóttir".split(), False),
    "east_asian": ("Haruto Sakura Minjun Seoyeon Ren Hina".split(),
                   "Watanabe Yamamoto Kobayashi Choi Takahashi Jeong".split(), False),
}

# places that look like people: two or more capitalised words, several with diacritics
PLACES = ["Kuala Lumpur", "Buenos Aires", "São Paulo", "Ho Chi Minh City", "Rio de Janeiro",
          "Addis Ababa", "Dar es Salaam", "Hong Kong", "Tel Aviv", "Abu Dhabi", "Cape Town",
          "New Delhi", "Mexico City", "Los Angeles", "San Francisco", "Nizhny Novgorod",
          "Santa Cruz", "Phnom Penh", "Reykjavík", "Wrocław", "Zürich", "Thessaloniki",
          "Guadalajara", "Montréal", "Port Louis", "Porto Alegre", "Baton Rouge", "Las Palmas"]

PRODUCTS = ["Microsoft Teams", "Google Drive", "Visual Studio Code", "Adobe Acrobat", "Power BI",
            "Zoom Rooms", "Jira Service Management", "SharePoint Online", "Tableau Server",
            "Workday Payroll", "Oracle Fusion", "Salesforce Lightning", "Apple Pay",
            "Slack Huddles", "Notion Calendar", "Figma Dev Mode", "Grafana Loki",
            "Deutsche Bahn", "Air France", "Banco Santander", "Coca Cola", "Hewlett Packard"]

# capitalised phrases that are not people and that no detector list knows (a test checks):
# landmarks, events, open-source projects. They measure name precision on the unknown
UNLISTED = ["Machu Picchu", "Angkor Wat", "Burj Khalifa", "Loch Ness", "Apache Kafka",
            "Silicon Valley", "Premier League", "Golden Gate", "Iguazu Falls", "Baton Rouge",
            "Kafka Connect", "Titicaca Shore", "Mont Blanc", "Kilimanjaro Marathon",
            "Ansible Galaxy", "Grand Bazaar", "Sagrada Família", "Giro Ciclistico",
            "Rust Analyzer", "Camino Real", "Boca Juniors", "Oktoberfest Wiesn"]

# Title-case headings are built from these: "Annual Leave Policy", "Remote Travel Checklist"
HEADING_WORDS = (
    "Annual Quarterly Remote Global Regional Corporate Internal Mandatory Interim Revised "
    "Draft Updated Hybrid Strategic Confidential".split(),
    "Leave Travel Expense Security Data Retention Incident Business Vendor Onboarding "
    "Procurement Pension Wellbeing Compliance Parental Relocation".split(),
    "Policy Review Plan Guidelines Checklist Handbook Schedule Procedure Summary Report "
    "Framework Roadmap Charter Memo".split(),
)

MONTHS = ("January February March April May June July August September October November "
          "December").split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()

# capitalised words that open a sentence and are followed by another capitalised word
SENTENCE_STARTS = ["Yesterday Finance", "Tomorrow Legal", "Today Procurement", "Meanwhile IT",
                   "Last week Payroll", "Kindly Note", "Please See", "Attached Find",
                   "Urgent Notice", "Reminder Friday"]

# domains for internationalised addresses: Unicode labels and their Punycode forms
IDN_DOMAINS = ["bücher.de", "пример.рф", "例え.jp", "παράδειγμα.ελ", "münchen.example",
               "xn--bcher-kva.de", "correo.españa.es", "उदाहरण.भारत", "société.fr"]
UNICODE_LOCALS = ["josé.garcía", "анна", "δοκιμή", "用户", "zoë.o'connor", "søren+hr",
                  "müller.jürgen", "प्रिया", "Ωmega.Team", "đặng.nam"]
