"""How RET-LLM's synthetic data says things (§3.3, Table 1): relation phrases, statements and questions per type.

The five relations of the people–company data set, each with the sentences a user writes to state it and the
questions of RET-LLM Table 1's query types; `generator` draws from these tables (notebook 01). Kept as tables, one
relation per block, so a reader can check the phrasings against the paper at a glance.

The PARAPHRASE_* tables are the held-out paraphrase split's: new verbs, the passive voice, questions in
new words and with typos, and joins for several facts in one statement, none of them a training template, to test
whether a model trained on the tables above generalises beyond them.

These tables are the paper build's (`RetLLMConfig.phrasings = "paper"`, the default); the wide build's words and
shapes are in `wide_lexicon` and `wide_phrasings`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "RELATIONS",
    "Forms",
    "FORMS",
    "PHRASE_KEY",
    "QUESTIONS",
    "Paraphrases",
    "PARAPHRASE_FORMS",
    "PARAPHRASE_QUESTIONS",
    "PARAPHRASE_TYPOS",
    "JOIN_TWO",
    "JOIN_THREE",
]

RELATIONS = {
    "employment": "employed by",
    "manager": "manager of",
    "investor": "investor in",
    "founder": "founder of",
    "customer": "customer of",
}


# fmt: off
@dataclass(frozen=True)
class Forms:
    """How one relation is said: answer predicates, write statements, questions."""

    sg: str  # "{P} is employed by {O}." in answers
    pl: str
    write_sg: tuple[str, ...]
    write_pl: tuple[str, ...]
    per_rel: tuple[str, ...]  # {X}
    rel: tuple[str, ...]
    org_rel: tuple[str, ...]  # {O}


FORMS = {
    "employment": Forms(
        "is employed by", "are employed by",
        ("{P} is employed by {O}.", "{P} works for {O}.", "{P} works at {O}.", "{O} employs {P}.",
         "{P} is an employee of {O}."),
        ("{P} are employed by {O}.", "{P} work for {O}.", "{P} work at {O}.", "{O} employs {P}.",
         "{P} are employees of {O}."),
        ("Where is {X} employed?", "Who employs {X}?", "Which company does {X} work for?", "Who is {X}'s employer?"),
        ("Who is employed by which company?", "Who works for which company?", "Who are the employees?",
         "List all employees."),
        ("Who is employed by {O}?", "Who works for {O}?", "Who are the employees of {O}?", "Who does {O} employ?")),
    "manager": Forms(
        "is a manager of", "are managers of",
        ("{P} is a manager of {O}.", "{P} is a manager at {O}.", "{P} manages {O}.", "{O} is managed by {P}.",
         "{P} works as a manager at {O}."),
        ("{P} are managers of {O}.", "{P} are managers at {O}.", "{P} manage {O}.", "{O} is managed by {P}.",
         "{P} work as managers at {O}."),
        ("Which company is {X} a manager of?", "What does {X} manage?", "Where is {X} a manager?",
         "Which company does {X} manage?"),
        ("Who is a manager of which company?", "Who manages which company?", "Who are the managers?",
         "List all managers."),
        ("Who is a manager of {O}?", "Who manages {O}?", "Who are the managers of {O}?", "Who are {O}'s managers?")),
    "investor": Forms(
        "is an investor in", "are investors in",
        ("{P} is an investor in {O}.", "{P} invests in {O}.", "{P} has invested in {O}.", "{P} holds shares in {O}.",
         "{O} counts {P} among its investors."),
        ("{P} are investors in {O}.", "{P} invest in {O}.", "{P} have invested in {O}.", "{P} hold shares in {O}.",
         "{O} counts {P} among its investors."),
        ("Which company is {X} an investor in?", "Where has {X} invested?", "What company does {X} invest in?",
         "Which company has {X} invested in?"),
        ("Who is an investor in which company?", "Who invests in which company?", "Who are the investors?",
         "List all investors."),
        ("Who is an investor in {O}?", "Who invested in {O}?", "Who are the investors in {O}?",
         "Who are {O}'s investors?")),
    "founder": Forms(
        "is a founder of", "are founders of",
        ("{P} is a founder of {O}.", "{P} founded {O}.", "{O} was founded by {P}.", "{P} co-founded {O}.",
         "{P} started {O}."),
        ("{P} are founders of {O}.", "{P} founded {O}.", "{O} was founded by {P}.", "{P} co-founded {O}.",
         "{P} started {O}."),
        ("Which company did {X} found?", "What is {X} the founder of?", "What company was founded by {X}?",
         "Which company did {X} start?"),
        ("Who is a founder of which company?", "Who founded which company?", "Who are the founders?",
         "List all founders."),
        ("Who is a founder of {O}?", "Who founded {O}?", "Who are the founders of {O}?", "Who started {O}?")),
    "customer": Forms(
        "is a customer of", "are customers of",
        ("{P} is a customer of {O}.", "{P} is a client of {O}.", "{P} buys from {O}.", "{P} shops at {O}.",
         "{O} has {P} as a customer."),
        ("{P} are customers of {O}.", "{P} are clients of {O}.", "{P} buy from {O}.", "{P} shop at {O}.",
         "{O} has {P} as customers."),
        ("Which company is {X} a customer of?", "Where is {X} a customer?", "What company does {X} buy from?",
         "Which company is {X} a client of?"),
        ("Who is a customer of which company?", "Who buys from which company?", "Who are the customers?",
         "List all customers."),
        ("Who is a customer of {O}?", "Who buys from {O}?", "Who are the customers of {O}?",
         "Who are {O}'s customers?")),
}
PHRASE_KEY = {phrase: key for key, phrase in RELATIONS.items()}

QUESTIONS = {  # query types whose phrasing does not depend on the relation
    "per": ("What do you know about {X}?", "Tell me about {X}.", "Who is {X}?", "Which company is {X} connected to?",
            "How is {X} related to a company?"),
    "per_org": ("What is the relation between {X} and {O}?", "How is {X} related to {O}?",
                "What is {X}'s connection to {O}?", "How are {X} and {O} connected?"),
    "org": ("Who is related to {O}?", "Who is connected to {O}?", "What do you know about {O}?",
            "Which people are associated with {O}?", "Tell me everyone linked to {O}."),
}
# fmt: on


# ------------------------------------------------------------------------------------------ held-out paraphrases
# fmt: off
@dataclass(frozen=True)
class Paraphrases:
    """How one relation is said in the held-out paraphrase split: none of these is a FORMS template."""

    write_sg: tuple[str, ...]  # new verbs and phrasings, active voice: "{P} has a job at {O}."
    write_pl: tuple[str, ...]
    passive_sg: tuple[str, ...]  # passive voice: "{O} is run by {P}."
    passive_pl: tuple[str, ...]
    per_rel: tuple[str, ...]  # questions in new words; {X}
    rel: tuple[str, ...]
    org_rel: tuple[str, ...]  # {O}
    typo_per_rel: tuple[str, ...]  # questions with a typo in a word that is not a name; {X}
    typo_rel: tuple[str, ...]
    typo_org_rel: tuple[str, ...]  # {O}


PARAPHRASE_FORMS = {
    "employment": Paraphrases(
        write_sg=("{P} is on the payroll of {O}.", "{P} has a job at {O}.", "{P} is on staff at {O}.",
                  "{P} earns a salary from {O}.", "{P} is a member of staff at {O}."),
        write_pl=("{P} are on the payroll of {O}.", "{P} have jobs at {O}.", "{P} are on staff at {O}.",
                  "{P} earn a salary from {O}.", "{P} are members of staff at {O}."),
        passive_sg=("{P} is employed at {O}.", "{P} was hired by {O}.", "{P} is paid by {O}.",
                    "{P} has been taken on by {O}."),
        passive_pl=("{P} are employed at {O}.", "{P} were hired by {O}.", "{P} are paid by {O}.",
                    "{P} have been taken on by {O}."),
        per_rel=("Who does {X} work for?", "{X} is employed by which company?", "Where does {X} have a job?",
                 "Which firm pays {X}'s salary?", "By whom is {X} employed?"),
        rel=("Who has a job, and where?", "Which people are on a payroll?", "Who is employed by a company?",
             "Name everyone who has an employer.", "Which people have jobs?"),
        org_rel=("Who is on the payroll of {O}?", "Who has a job at {O}?", "Which people work at {O}?",
                 "Who is on staff at {O}?", "Who is employed at {O}?"),
        typo_per_rel=("Whre is {X} employed?", "Which compnay does {X} work for?", "Who does {X} wrok for?",
                      "{X} is employd by which company?"),
        typo_rel=("Who are the employes?", "List all employess.", "Who has a jbo, and where?",
                  "Who works for wich company?"),
        typo_org_rel=("Who is employd by {O}?", "Who works fro {O}?", "Who has a job att {O}?",
                      "Who are the emplyees of {O}?")),
    "manager": Paraphrases(
        write_sg=("{P} runs {O}.", "{P} heads a team at {O}.", "{P} oversees {O}.", "{P} is in charge at {O}.",
                  "{P} holds a management post at {O}."),
        write_pl=("{P} run {O}.", "{P} head teams at {O}.", "{P} oversee {O}.", "{P} are in charge at {O}.",
                  "{P} hold management posts at {O}."),
        passive_sg=("{O} is run by {P}.", "{O} is overseen by {P}.", "{O} is supervised by {P}.", "{O} is led by {P}."),
        passive_pl=("{O} is run by {P}.", "{O} is overseen by {P}.", "{O} is supervised by {P}.", "{O} is led by {P}."),
        per_rel=("What does {X} run?", "Where is {X} in charge?", "Which company does {X} oversee?",
                 "At which firm does {X} head a team?", "{X} is a manager at which company?"),
        rel=("Who runs which company?", "Which people are in charge somewhere?", "Who holds a management post?",
             "Name every manager.", "Who oversees a company?"),
        org_rel=("Who runs {O}?", "Who is in charge at {O}?", "By whom is {O} managed?", "Who heads a team at {O}?",
                 "Who oversees {O}?"),
        typo_per_rel=("Wich company does {X} manage?", "What does {X} manag?", "Where is {X} a manger?",
                      "What does {X} rnu?"),
        typo_rel=("Who are the mangers?", "List all managrs.", "Who manages wich company?",
                  "Who runs whcih company?"),
        typo_org_rel=("Who manges {O}?", "Who are the manegers of {O}?", "Who is in chrage at {O}?",
                      "Who is a manager fo {O}?")),
    "investor": Paraphrases(
        write_sg=("{P} owns a stake in {O}.", "{P} put money into {O}.", "{P} is a shareholder of {O}.",
                  "{P} backs {O} financially.", "{P} bought shares of {O}."),
        write_pl=("{P} own stakes in {O}.", "{P} put money into {O}.", "{P} are shareholders of {O}.",
                  "{P} back {O} financially.", "{P} bought shares of {O}."),
        passive_sg=("{O} is backed by {P}.", "{O} was funded by {P}.", "{O} is partly owned by {P}.",
                    "{O} has been financed by {P}."),
        passive_pl=("{O} is backed by {P}.", "{O} was funded by {P}.", "{O} is partly owned by {P}.",
                    "{O} has been financed by {P}."),
        per_rel=("Where has {X} put money?", "Which company does {X} own a stake in?",
                 "{X} is a shareholder of which company?", "What does {X} invest in?",
                 "In which firm does {X} hold a stake?"),
        rel=("Who owns a stake in which company?", "Which people are shareholders?",
             "Who has put money into a company?", "Name every investor.", "Who are the shareholders?"),
        org_rel=("Who owns a stake in {O}?", "Who put money into {O}?", "Who are the shareholders of {O}?",
                 "By whom is {O} backed?", "Who has invested money in {O}?"),
        typo_per_rel=("Wich company is {X} an investor in?", "Where has {X} invsted?",
                      "What company does {X} invets in?", "Which company has {X} invested inn?"),
        typo_rel=("Who are the invetsors?", "List all investros.", "Who invests in wich company?",
                  "Who owns a stkae in which company?"),
        typo_org_rel=("Who is an invester in {O}?", "Who invsted in {O}?", "Who are {O}'s invesotrs?",
                      "Who owns a stak in {O}?")),
    "founder": Paraphrases(
        write_sg=("{P} set up {O}.", "{P} established {O}.", "{P} created {O}.", "{P} launched {O}.",
                  "{P} built {O} from scratch."),
        write_pl=("{P} set up {O}.", "{P} established {O}.", "{P} created {O}.", "{P} launched {O}.",
                  "{P} built {O} from scratch."),
        passive_sg=("{O} was set up by {P}.", "{O} was established by {P}.", "{O} was created by {P}.",
                    "{O} was launched by {P}."),
        passive_pl=("{O} was set up by {P}.", "{O} was established by {P}.", "{O} was created by {P}.",
                    "{O} was launched by {P}."),
        per_rel=("What did {X} set up?", "Which company was established by {X}?", "What firm did {X} create?",
                 "{X} is a founder of which company?", "Which business did {X} launch?"),
        rel=("Who set up which company?", "Which people established a company?", "Who created a company?",
             "Name every founder.", "Who launched which firm?"),
        org_rel=("Who set up {O}?", "By whom was {O} established?", "Who created {O}?", "Who launched {O}?",
                 "Who built {O} from scratch?"),
        typo_per_rel=("Wich company did {X} found?", "What is {X} the fonder of?", "Which company did {X} strat?",
                      "What company was founed by {X}?"),
        typo_rel=("Who are the fonders?", "List all foudners.", "Who founded wich company?",
                  "Who set up whihc company?"),
        typo_org_rel=("Who foundd {O}?", "Who are the fuonders of {O}?", "Who startd {O}?",
                      "Who is a fouder of {O}?")),
    "customer": Paraphrases(
        write_sg=("{P} is a regular customer at {O}.", "{P} purchases from {O}.", "{P} orders from {O}.",
                  "{P} gets products from {O}.", "{P} uses the services of {O}."),
        write_pl=("{P} are regular customers at {O}.", "{P} purchase from {O}.", "{P} order from {O}.",
                  "{P} get products from {O}.", "{P} use the services of {O}."),
        passive_sg=("{P} is served by {O}.", "{P} is supplied by {O}.", "{P} is billed by {O}.",
                    "{O} is patronised by {P}."),
        passive_pl=("{P} are served by {O}.", "{P} are supplied by {O}.", "{P} are billed by {O}.",
                    "{O} is patronised by {P}."),
        per_rel=("Where does {X} shop?", "Which company does {X} purchase from?", "Who supplies {X}?",
                 "{X} is a customer of which company?", "Whose services does {X} use?"),
        rel=("Who purchases from which company?", "Which people are regular customers somewhere?",
             "Who orders from a company?", "Name every customer.", "Who are the clients?"),
        org_rel=("Who purchases from {O}?", "Who orders from {O}?", "Who shops at {O}?",
                 "Who are the clients of {O}?", "Who does {O} sell to?"),
        typo_per_rel=("Which company is {X} a custmer of?", "Where is {X} a cutsomer?",
                      "What company does {X} buy frm?", "Which compay is {X} a client of?"),
        typo_rel=("Who are the custmers?", "List all cusotmers.", "Who is a customr of which company?",
                  "Who buys form which company?"),
        typo_org_rel=("Who is a custumer of {O}?", "Who buys frm {O}?", "Who are the cusomers of {O}?",
                      "Who are {O}'s custmers?")),
}

PARAPHRASE_QUESTIONS = {  # relation-independent query types, in new words
    "per": ("What can you tell me about {X}?", "Give me the facts on {X}.", "What is known about {X}?",
            "Which firm is {X} linked to?", "Anything on file about {X}?"),
    "per_org": ("What links {X} to {O}?", "In what way is {X} connected with {O}?",
                "What does {X} have to do with {O}?", "What role does {X} play at {O}?",
                "What ties {X} and {O} together?"),
    "org": ("Who has ties to {O}?", "Which people have anything to do with {O}?", "Who is involved with {O}?",
            "List the people linked with {O}.", "What people do you have on file for {O}?"),
}
PARAPHRASE_TYPOS = {  # the same query types with a typo in a word that is not a name
    "per": ("Wat do you know about {X}?", "Tell me abuot {X}.", "Which compny is {X} connected to?",
            "How is {X} relatd to a company?", "What do you knwo about {X}?"),
    "per_org": ("What is the relaton between {X} and {O}?", "How is {X} realted to {O}?",
                "What is {X}'s conection to {O}?", "How are {X} and {O} conected?"),
    "org": ("Who is relatd to {O}?", "Who is conected to {O}?", "Wich people are associated with {O}?",
            "Tell me everyone linkd to {O}.", "What do you knwo about {O}?"),
}

# Several facts in one statement: write templates (FORMS' and the ones above) without their full stop, joined
# like this. "{0} and {1}." only where {0} does not end in people, and three clauses are joined with ';' where an
# inner one does, so a list of names never runs on into the next clause's subject.
JOIN_TWO = ("{0}, and {1}.", "{0}; {1}.", "{0}, while {1}.", "{0} and {1}.")
JOIN_THREE = ("{0}, {1}, and {2}.", "{0}; {1}; {2}.")
# fmt: on
