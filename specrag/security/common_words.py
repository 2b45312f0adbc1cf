"""Capitalised words and phrases that are not people: the name detector's stop-lists.

``STOP_WORDS`` are words that, capitalised, start a sentence or make up a heading or a
department ("Please", "Annual Leave Policy", "Finance Team"), plus months, weekdays,
countries and languages. A run of capitalised words is cut at each of them, so "Annual
Leave Policy" leaves nothing and "Yesterday Xochitl Quispe" leaves the person. Words
that are also common surnames or given names (Green, Brown, King, Park, Grace, Price,
Hall) are left out on purpose: "Amara Park" must stay a candidate.

``NOT_PERSON`` are proper names of places, companies and products: a run containing
one is not a person ("Kuala Lumpur", "Adobe Acrobat"). ``PLACE_STARTERS`` open place
names ("San", "Santa", "Porto", "Los") and ``PLACE_NOUNS`` follow them ("office",
"airport", "rollout"): a run with one before or after it is not a person either.

Deliberately not here: people (``names``) and the matching (``name_finder``). The lists
are English-centred; a capitalised common word of another language is a candidate.
"""

from __future__ import annotations

STOP_WORDS = frozenset("""
The A An This That These Those It Its We Our Ours You Your They Their He She His Her I My Me
Us Them And Or But Nor So Yet If When While Where What Which Who Whom Whose Why How Because
Although Though Since Until Unless After Before During For From With Without Within Into
Onto Upon About Above Below Under Over Between Among Through Across Around Against Along
Behind Beyond Near Per Via At By In On Of To Up Out Off Not No Yes All Any Each Every Some
Many Much Most More Less Few Several Both Either Neither Other Another Such Same Own Only
Just Also Very Too Quite Rather Here There Now Then Today Tomorrow Yesterday Tonight
Meanwhile However Therefore Moreover Furthermore Otherwise Instead Additionally Finally
Overall Currently Recently Unfortunately Fortunately Apparently Generally Hopefully
Ideally Honestly Actually Please Kindly Thanks Thank Hello Hi Hey Dear Regards Sincerely
Cheers Best Welcome Sorry Note Notes Notice Reminder Attached Enclosed See Find Re Fwd Subject
Attn Attention Important Urgent Update Updated Updates New Old Next Last First Second Third
Final Following Previous Current Recent Early Late Is Are Was Were Be Been Being Am Do Does
Did Done Have Has Had Will Would Can Could May Might Must Shall Should Let Make Made Get Got
Go Going Went Come Take Took Give Gave Send Sent Call Called Check Confirm Contact Review
Approve Approved Submit Submitted Ask Use Using Used Keep Read Write Open Close Closed
Start Started Stop Join Joined Click Select Enter Add Remove Delete Create Edit Save Cancel
Print Download Upload Sign Signed Book Booked Pay Paid Order Ordered Ship Shipped Deliver
Delivered Request Requested Report Reported Return Returned Schedule Scheduled Complete
Completed Pending Ready Regarding According Concerning Following Including Excluding
January February March April May June July August September October November December
Monday Tuesday Wednesday Thursday Friday Saturday Sunday Christmas Easter Ramadan Diwali
Eid Thanksgiving Halloween Year Years Month Months Week Weeks Day Days Quarter Q1 Q2 Q3 Q4
Policy Policies Procedure Procedures Process Plan Plans Planning Summary Overview Minutes
Agenda Memo Guide Guidelines Guidance Handbook Manual Checklist Timeline Roadmap Framework
Strategy Charter Standard Standards Template Form Forms Requests Application Applications
Agreement Contract Invoice Invoices Receipt Quote Proposal Budget Forecast Statement Account
Accounts Payment Payments Payroll Pension Benefits Leave Holiday Holidays Vacation Absence
Sick Parental Maternity Paternity Travel Expense Expenses Relocation Training Onboarding
Offboarding Recruitment Hiring Interview Performance Appraisal Compliance Security Privacy
Data Retention Protection Incident Response Risk Audit Assessment Management Manager
Managers Director Directors Officer Board Committee Council Team Teams Group Groups
Department Dept Division Unit Office Offices Branch Site Campus Centre Center Headquarters
Company Corporation Corp Inc Ltd Llc Gmbh Ag Plc Co Holdings Services Service Solutions
Systems System Technologies Technology Software Hardware Network Networks Cloud Platform
Portal Server Servers Database Cluster Engine Studio Code Drive Docs Sheets Mail Calendar
Chat Meeting Meetings Conference Webinar Workshop Event Events Launch Release Version
Edition Feature Features Product Products Project Projects Program Programme Initiative
Operations Finance Financial Legal Procurement Purchasing Sales Marketing Support
Engineering Research Development Design Quality Logistics Supply Chain Customer Customers
Client Clients Vendor Vendors Supplier Suppliers Partner Partners Business Enterprise
Corporate Internal External Global Regional Local National International Annual Quarterly
Monthly Weekly Daily Remote Hybrid Mandatory Optional General Special Public Private
Confidential Strategic Operational Technical Interim Draft Revised Official Premium Basic
Pro Plus Free Total Tax Income Revenue Cost Costs List Rate Rates Fee Fees Credit
Debit Loan Insurance Claim Claims Health Safety Wellness Medical Dental Staff Employee
Employees Member Members People Human Resources Talent Learning Education Student Students
Course Courses Exam Lesson Class Schedule Calendar Phone Email Address Name Number Date
Time Location Status Priority Ticket Issue Issues Bug Bugs Task Tasks Action Actions Item
Items Question Questions Answer Answers Feedback Survey Results Result Analysis Dashboard
Metrics Goals Objectives Key Results Summary Introduction Conclusion Appendix Section Chapter
Table Figure Terms Conditions Notice Notices Rules Rule Code Conduct Ethics Values
Mission Vision Culture Diversity Inclusion Equity Sustainability Environment Environmental
Energy Climate Carbon Net Zero Emergency Fire Evacuation Access Identity Password Login
Account Accounts Backup Recovery Disaster Continuity Change Changes Maintenance Upgrade
Migration Deployment Production Staging Testing Test Tests Pilot Beta Alpha Live Online
Offline Mobile Desktop Web Website App Apps Internet Intranet Wifi Printer Laptop Device
Devices Equipment Asset Assets Inventory Stock Warehouse Shipping Delivery Deliveries
Returns Refund Refunds Warranty Repair Replacement Claims Dispute Approval Approvals
Signature Signatures Consent Contract Contracts Renewal Renewals Subscription License
Licence Licenses Licences Invoice Billing Collections Treasury Tax Taxes Audit Audits
Kingdom United States Republic Union Federal Europe European Asia Asian Africa African
America American Americas Pacific Atlantic Arctic Middle Eastern Western Northern Southern
Central Upper Lower Greater City Town County State Province Region District Street Road
Avenue Lane Boulevard Square Building Floor Room Suite Airport Station Bridge Tower Plaza
Mall Market Hospital Clinic University College School Institute Academy Library Museum
Bank Embassy Consulate Ministry Government Court Police Army China India Japan Germany
France Spain Italy Brazil Mexico Canada Russia Australia Ireland Scotland Wales England
Britain Netherlands Belgium Switzerland Austria Poland Sweden Norway Denmark Finland Greece
Turkey Egypt Nigeria Kenya Argentina Chile Peru Colombia Vietnam Korea Thailand Indonesia
Malaysia Philippines Pakistan Bangladesh Portugal English Spanish French German Italian
Portuguese Chinese Japanese Korean Russian Arabic Hindi Dutch Greek Polish Turkish Irish
Welsh Scottish British Indian Mexican Canadian Brazilian Australian
""".split())

# proper names of places, companies and products that look like people
NOT_PERSON = frozenset("""
Kuala Lumpur Aires Buenos Paulo Janeiro Addis Ababa Salaam Kong Aviv Dhabi Delhi Mumbai
Bangalore Bengaluru Chennai Kolkata Hyderabad Karachi Lahore Dhaka Jakarta Manila Bangkok
Hanoi Seoul Tokyo Osaka Kyoto Beijing Shanghai Shenzhen Guangzhou Taipei Singapore Sydney
Melbourne Auckland Toronto Vancouver Montreal Montréal Chicago Boston Seattle Houston Dallas
Atlanta Miami Denver Vegas Orleans Lima Bogotá Bogota Quito Caracas Havana Nairobi Lagos
Accra Cairo Casablanca Johannesburg Durban Istanbul Ankara Tehran Dubai Doha Riyadh Jeddah
Amman Beirut Jerusalem Athens Rome Milan Madrid Barcelona Lisbon Paris Lyon Marseille
Brussels Amsterdam Rotterdam Berlin Munich München Hamburg Frankfurt Cologne Köln
Düsseldorf Stuttgart Vienna Wien Zurich Zürich Geneva Prague Warsaw Kraków Krakow Wrocław
Budapest Bucharest Belgrade Zagreb Moscow Kyiv Kiev Minsk Riga Tallinn Vilnius Helsinki
Stockholm Oslo Copenhagen Reykjavík Dublin London Manchester Birmingham Edinburgh Glasgow
Cardiff Belfast Thessaloniki Novgorod Nizhny Petersburg Guadalajara Monterrey Phnom Penh
Yangon Kathmandu Colombo Angeles
Microsoft Google Apple Amazon Adobe Oracle Sap Salesforce Slack Zoom Jira Atlassian
Confluence Tableau Workday SharePoint OneDrive Notion Figma Grafana Kibana Elastic Azure
GitHub GitLab Docker Kubernetes Linux Windows Android Excel Outlook PowerPoint Dropbox
Airbnb Uber Netflix Spotify Facebook Instagram LinkedIn Twitter YouTube WhatsApp Telegram
Samsung Sony Toyota Siemens Bosch Nokia Intel Nvidia Cisco Dell Lenovo Hewlett Packard
Mastercard PayPal Stripe Revolut Santander Barclays Lufthansa Deutsche Bahn Emirates Coca
Cola Pepsi Nestlé Unilever Accenture Deloitte Vodafone Telekom Huawei Alibaba Tencent
""".split())

# first words of place names; "Santa Cruz", "Porto Alegre", "Los Angeles"
PLACE_STARTERS = frozenset("""
San Santa Santo São Saint St Porto Port Puerto Fort Mount Mt Lake Cape Rio Río Ciudad Los Las
La El Les Il Bad Nueva Nuevo Novo Nova Isla Isle Costa Villa Bahía
""".split())

# words after a place or product, not after a person ("the Kuala Lumpur office")
PLACE_NOUNS = (
    "office", "offices", "team", "teams", "branch", "site", "campus", "airport", "station",
    "consulate", "embassy", "clinic", "hospital", "headquarters", "hq", "region", "area",
    "store", "warehouse", "plant", "factory", "data centre", "data center", "rollout",
    "licence", "license", "release", "page", "server", "instance", "workspace", "channel",
    "platform", "subscription", "migration", "project", "city", "province", "state",
    "street", "road", "metro", "port", "account", "app", "integration", "api", "plugin",
    "payment", "payments", "upgrade", "outage", "login", "version", "pipeline", "board",
)
