"""How RET-LLM's synthetic data says things (§3.3, Table 1): relation phrases, statements and questions per type.

The five relations of the people–company data set, each with the sentences a user writes to state it and the
questions of RET-LLM Table 1's query types; `synthetic` draws from these tables (notebook 01). Kept as tables, one
relation per block, so a reader can check the phrasings against the paper at a glance.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RELATIONS", "Forms", "FORMS", "PHRASE_KEY", "QUESTIONS"]

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
