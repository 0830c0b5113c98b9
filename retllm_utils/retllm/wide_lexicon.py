"""The words of the wide phrasings (`RetLLMConfig.phrasings = "wide"`): how each of the five relations is said.

One `Lexicon` per relation, one block each, so a reader can check the words at a glance; `wide_phrasings` builds the
statement and question templates of every shape from these, and `wide` draws from them. Fields named `held_*` are
the held-out words (the `new_verb` shape, never in a training row); everything else is trained on.

Verbs are (singular, plural, question) triples: "{P} works at {O}." / "{P} work at {O}." / "Which company does {X}
work at?"; the question form is what follows a wh-word ("does {X} work at"), so its first word is the auxiliary a
yes/no question starts with. Nouns are (singular, plural) predicates after "is" / "are". Templates name the people
{P}, the organisation {O}, the asked-about person {X} and a year {Y}; (sg, pl) pairs agree with one or several
people. Time phrases are said but never stored: a RET-LLM triple has no time slot (§3.1), so "since 2019" only
qualifies the fact, and `docred_mix` leaves Re-DocRED's date-valued relations out for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lexicon", "LEXICON", "GENERIC", "FILLERS", "YEARS"]

Pair = tuple[str, str]


def _same(*templates: str) -> tuple[Pair, ...]:
    """Templates that read the same for one person or several (the organisation is the subject)."""
    return tuple((t, t) for t in templates)


# fmt: off
@dataclass(frozen=True)
class Lexicon:
    """The words of one relation, trained on unless named held_*."""

    verbs: tuple[tuple[str, str, str], ...]  # (sg, pl, question form with {X})
    nouns: tuple[Pair, ...]  # ("an employee of", "employees of")
    roles: tuple[str, ...]  # bare plural role nouns: "employees"
    org_active: tuple[Pair, ...]  # the organisation the subject: "{O} hired {P}."
    passive: tuple[Pair, ...]  # be-passives: "{P} was hired by {O}.", "{O} was founded by {P}."
    possessive: tuple[Pair, ...]  # "{P}'s employer is {O}." / "{O}'s staff includes {P}."
    time: tuple[Pair, ...]  # with a time phrase that is not stored
    where: tuple[str, ...]  # per_rel questions with "where"
    poss_per_rel: tuple[str, ...]  # possessive questions, per_rel ({X}) and org_rel ({O})
    poss_org_rel: tuple[str, ...]
    pied_per_rel: tuple[str, ...]  # held out: a preposition before the wh-word
    pied_org_rel: tuple[str, ...]
    held_verbs: tuple[tuple[str, str, str], ...]  # held out: new verbs, nouns and role nouns
    held_nouns: tuple[Pair, ...]
    held_roles: tuple[str, ...]
    get_passive: tuple[Pair, ...]  # held out: get-passives


LEXICON = {
    "employment": Lexicon(
        verbs=(("works at", "work at", "does {X} work at"), ("works for", "work for", "does {X} work for"),
               ("is on the payroll of", "are on the payroll of", "is {X} on the payroll of"),
               ("has a job at", "have jobs at", "does {X} have a job at"),
               ("is on staff at", "are on staff at", "is {X} on staff at")),
        nouns=(("an employee of", "employees of"), ("a member of staff at", "members of staff at"),
               ("a staff member at", "staff members at")),
        roles=("employees", "staff members"),
        org_active=(("{O} employs {P}.", "{O} employs {P}."), ("{O} hired {P}.", "{O} hired {P}."),
                    ("{O} has {P} on its payroll.", "{O} has {P} on its payroll."), ("{O} pays {P}.", "{O} pays {P}.")),
        passive=(("{P} is employed by {O}.", "{P} are employed by {O}."),
                 ("{P} was hired by {O}.", "{P} were hired by {O}."),
                 ("{P} is paid by {O}.", "{P} are paid by {O}.")),
        possessive=(("{P}'s employer is {O}.", "{O}'s staff includes {P}."),
                    ("{P} is one of {O}'s employees.", "{O}'s employees include {P}.")),
        time=(("{P} has worked at {O} since {Y}.", "{P} have worked at {O} since {Y}."),
              ("{P} joined {O} last year.", "{P} joined {O} last year."),
              ("Since {Y}, {P} has been employed by {O}.", "Since {Y}, {P} have been employed by {O}."),
              ("{P} started working at {O} in {Y}.", "{P} started working at {O} in {Y}.")),
        where=("Where does {X} work?", "Where is {X} on the payroll?"),
        poss_per_rel=("Who is {X}'s employer?", "What is {X}'s workplace?"),
        poss_org_rel=("Who are {O}'s employees?", "Who is on {O}'s staff?"),
        pied_per_rel=("For which company does {X} work?", "At which company is {X} on staff?"),
        pied_org_rel=("By whom is {O} staffed?",),
        held_verbs=(("draws a salary from", "draw salaries from", "does {X} draw a salary from"),
                    ("is on the books at", "are on the books at", "is {X} on the books at")),
        held_nouns=(("a salaried worker at", "salaried workers at"),),
        held_roles=("salaried workers",),
        get_passive=_same("{P} got hired by {O}.", "{P} got taken on by {O}.")),
    "manager": Lexicon(
        verbs=(("manages", "manage", "does {X} manage"), ("runs", "run", "does {X} run"),
               ("oversees", "oversee", "does {X} oversee"),
               ("heads a team at", "head teams at", "does {X} head a team at"),
               ("is in charge at", "are in charge at", "is {X} in charge at")),
        nouns=(("a manager of", "managers of"), ("a manager at", "managers at"), ("a boss at", "bosses at")),
        roles=("managers", "bosses"),
        org_active=(("{O} appointed {P} as a manager.", "{O} appointed {P} as managers."),
                    ("{O} put {P} in charge.", "{O} put {P} in charge."),
                    ("{O} promoted {P} to manager.", "{O} promoted {P} to manager.")),
        passive=(("{O} is managed by {P}.", "{O} is managed by {P}."), ("{O} is run by {P}.", "{O} is run by {P}."),
                 ("{P} was made a manager at {O}.", "{P} were made managers at {O}."),
                 ("{O} is overseen by {P}.", "{O} is overseen by {P}.")),
        possessive=(("{O}'s manager is {P}.", "{O}'s managers are {P}."),
                    ("{P} is one of {O}'s managers.", "{O}'s managers include {P}.")),
        time=(("{P} has managed {O} since {Y}.", "{P} have managed {O} since {Y}."),
              ("{P} became a manager at {O} last year.", "{P} became managers at {O} last year."),
              ("Since {Y}, {O} has been run by {P}.", "Since {Y}, {O} has been run by {P}.")),
        where=("Where is {X} in charge?", "Where does {X} manage a team?"),
        poss_per_rel=("Which company is under {X}'s management?", "Which firm is in {X}'s charge?"),
        poss_org_rel=("Who are {O}'s managers?", "Who is {O}'s boss?"),
        pied_per_rel=("At which company is {X} a manager?", "Of which company is {X} a manager?"),
        pied_org_rel=("By whom is {O} managed?",),
        held_verbs=(("supervises", "supervise", "does {X} supervise"),
                    ("is at the helm of", "are at the helm of", "is {X} at the helm of")),
        held_nouns=(("a supervisor at", "supervisors at"),),
        held_roles=("supervisors",),
        get_passive=(("{P} got promoted to manager at {O}.", "{P} got promoted to manager at {O}."),
                     ("{P} got put in charge of {O}.", "{P} got put in charge of {O}."))),
    "investor": Lexicon(
        verbs=(("invests in", "invest in", "does {X} invest in"),
               ("has invested in", "have invested in", "has {X} invested in"),
               ("owns a stake in", "own stakes in", "does {X} own a stake in"),
               ("holds shares in", "hold shares in", "does {X} hold shares in"),
               ("put money into", "put money into", "did {X} put money into")),
        nouns=(("an investor in", "investors in"), ("a shareholder of", "shareholders of"),
               ("a backer of", "backers of")),
        roles=("investors", "shareholders"),
        org_active=(*_same("{O} took money from {P}.", "{O} raised money from {P}."),
                    ("{O} has {P} as a shareholder.", "{O} has {P} as shareholders.")),
        passive=_same("{O} is backed by {P}.", "{O} was funded by {P}.", "{O} is partly owned by {P}."),
        possessive=(("{P} is one of {O}'s investors.", "{O}'s investors include {P}."),
                    ("{O}'s shareholders include {P}.", "{P} are {O}'s shareholders.")),
        time=(("{P} invested in {O} last year.", "{P} invested in {O} last year."),
              ("{P} has held shares in {O} since {Y}.", "{P} have held shares in {O} since {Y}."),
              ("Last year, {P} bought a stake in {O}.", "Last year, {P} bought stakes in {O}.")),
        where=("Where has {X} invested?", "Where does {X} hold shares?"),
        poss_per_rel=("What is {X}'s investment?", "Which company is in {X}'s portfolio?"),
        poss_org_rel=("Who are {O}'s investors?", "Who are {O}'s shareholders?"),
        pied_per_rel=("In which company has {X} invested?", "In which company does {X} hold shares?"),
        pied_org_rel=("By whom is {O} backed?",),
        held_verbs=(("bankrolls", "bankroll", "does {X} bankroll"),
                    ("has a financial stake in", "have a financial stake in", "does {X} have a financial stake in")),
        held_nouns=(("a financier of", "financiers of"),),
        held_roles=("financiers",),
        get_passive=_same("{O} got funded by {P}.", "{O} got backed by {P}.")),
    "founder": Lexicon(
        verbs=(("founded", "founded", "did {X} found"), ("started", "started", "did {X} start"),
               ("set up", "set up", "did {X} set up"), ("co-founded", "co-founded", "did {X} co-found"),
               ("established", "established", "did {X} establish")),
        nouns=(("a founder of", "founders of"), ("a co-founder of", "co-founders of"),
               ("the founder of", "the founders of")),
        roles=("founders", "co-founders"),
        org_active=(("{O} has {P} as its founder.", "{O} has {P} as its founders."),
                    ("{O} owes its existence to {P}.", "{O} owes its existence to {P}.")),
        passive=_same("{O} was founded by {P}.", "{O} was started by {P}.", "{O} was set up by {P}.",
                      "{O} was established by {P}."),
        possessive=(("{O}'s founder is {P}.", "{O}'s founders are {P}."),
                    ("{P} is one of {O}'s founders.", "{O}'s co-founders are {P}.")),
        time=(("Back in {Y}, {P} set up {O}.", "Back in {Y}, {P} set up {O}."),
              ("{P} founded {O} years ago.", "{P} founded {O} years ago."),
              ("Long ago, {O} was started by {P}.", "Long ago, {O} was started by {P}.")),
        where=("Where is {X} a founder?", "Where did {X} start a company?"),
        poss_per_rel=("Which company is {X}'s brainchild?", "What is {X}'s startup?"),
        poss_org_rel=("Who are {O}'s founders?", "Who is {O}'s founder?"),
        pied_per_rel=("Of which company is {X} a founder?", "In which company is {X} a co-founder?"),
        pied_org_rel=("By whom was {O} founded?",),
        held_verbs=(("created", "created", "did {X} create"), ("launched", "launched", "did {X} launch")),
        held_nouns=(("a creator of", "creators of"),),
        held_roles=("creators",),
        get_passive=_same("{O} got started by {P}.", "{O} got set up by {P}.")),
    "customer": Lexicon(
        verbs=(("buys from", "buy from", "does {X} buy from"), ("shops at", "shop at", "does {X} shop at"),
               ("orders from", "order from", "does {X} order from"),
               ("purchases from", "purchase from", "does {X} purchase from"),
               ("uses the services of", "use the services of", "does {X} use the services of")),
        nouns=(("a customer of", "customers of"), ("a client of", "clients of"),
               ("a regular customer at", "regular customers at")),
        roles=("customers", "clients"),
        org_active=(("{O} serves {P}.", "{O} serves {P}."), ("{O} sells to {P}.", "{O} sells to {P}."),
                    ("{O} has {P} as a customer.", "{O} has {P} as customers."),
                    ("{O} supplies {P}.", "{O} supplies {P}.")),
        passive=(("{P} is served by {O}.", "{P} are served by {O}."),
                 ("{P} is supplied by {O}.", "{P} are supplied by {O}."),
                 ("{P} is billed by {O}.", "{P} are billed by {O}.")),
        possessive=(("{P} is one of {O}'s customers.", "{O}'s customers include {P}."),
                    ("{O}'s client list includes {P}.", "{P} are {O}'s clients.")),
        time=(("{P} has been a customer of {O} since {Y}.", "{P} have been customers of {O} since {Y}."),
              ("{P} started buying from {O} last year.", "{P} started buying from {O} last year."),
              ("Since {Y}, {P} has shopped at {O}.", "Since {Y}, {P} have shopped at {O}.")),
        where=("Where does {X} shop?", "Where does {X} buy things?"),
        poss_per_rel=("Who is {X}'s supplier?", "What is {X}'s usual shop?"),
        poss_org_rel=("Who are {O}'s customers?", "Who are {O}'s clients?"),
        pied_per_rel=("From which company does {X} buy?", "At which company is {X} a customer?"),
        pied_org_rel=("By whom is {O} patronised?",),
        held_verbs=(("spends money at", "spend money at", "does {X} spend money at"),
                    ("gets supplies from", "get supplies from", "does {X} get supplies from")),
        held_nouns=(("a patron of", "patrons of"),),
        held_roles=("patrons",),
        get_passive=(("{P} gets served by {O}.", "{P} get served by {O}."),
                     ("{P} gets billed by {O}.", "{P} get billed by {O}."))),
}

# Questions whose words do not depend on the relation: shape -> query type -> templates ({X} person, {O} company).
GENERIC = {
    "who": {"per": ("Who is {X} linked with?", "Who does {X} have ties to?"),
            "org": ("Who has ties to {O}?", "Who is linked with {O}?", "Who has anything to do with {O}?")},
    "which": {"per": ("Which company does {X} have ties with?", "Which organisation is {X} tied to?",
                      "Which firm does {X} have ties to?"),
              "per_org": ("Which relation does {X} have with {O}?", "Which tie links {X} and {O}?"),
              "org": ("Which people are tied to {O}?", "Which people have ties to {O}?")},
    "what": {"per": ("What do we know about {X}?", "What ties does {X} have?", "What is on record for {X}?"),
             "per_org": ("What is {X} to {O}?", "What is the link between {X} and {O}?", "What ties {X} to {O}?"),
             "org": ("What people are linked to {O}?", "What do we have on {O}?")},
    "where": {"per": ("Where does {X} fit in?", "Where is {X} involved?")},
    "imperative": {"per": ("Tell me everything about {X}.", "Give me the details on {X}.", "Look up {X}."),
                   "per_org": ("Describe the tie between {X} and {O}.", "Explain the link between {X} and {O}."),
                   "org": ("Name everyone connected to {O}.", "List everyone tied to {O}.",
                           "Give me everyone linked to {O}.")},
    "possessive": {"per": ("What are {X}'s ties?", "What is {X}'s role?"),
                   "per_org": ("What is {X}'s role at {O}?", "What is {X}'s tie to {O}?"),
                   "org": ("Who are {O}'s people?", "Who are {O}'s contacts?")},
    # held out
    "embedded": {"per": ("Do you know anything about {X}?", "Can you tell me who {X} is?"),
                 "per_org": ("Do you know how {X} is connected to {O}?", "I wonder what {X} has to do with {O}."),
                 "org": ("Do you know who is connected to {O}?", "I wonder who has ties to {O}.")},
    "pied_piping": {"per": ("With which company is {X} connected?", "To which firm is {X} tied?"),
                    "per_org": ("In what way is {X} tied to {O}?", "In which role is {X} linked to {O}?"),
                    "org": ("With whom is {O} connected?", "To whom is {O} linked?")},
    "yes_no": {"per": ("Is {X} linked to any company?", "Does {X} have ties to a company?"),
               "per_org": ("Is {X} connected to {O}?", "Does {X} have ties to {O}?",
                           "Is there a link between {X} and {O}?"),
               "org": ("Is anyone connected to {O}?", "Does anybody have ties to {O}?")},
    "new_verb": {"per": ("What is {X} affiliated with?", "Which company is {X} affiliated with?"),
                 "per_org": ("How is {X} affiliated with {O}?", "What is {X}'s affiliation with {O}?"),
                 "org": ("Who is affiliated with {O}?", "Which people are affiliated with {O}?")},
}

# Fillers around a training sentence: (prefix, suffix); a prefix ending in ", " or "that " lower-cases the
# sentence's first word unless it is a name.
FILLERS = {
    "write": (("By the way, ", ""), ("Just so you know, ", ""), ("For the record, ", ""), ("I heard that ", ""),
              ("Someone told me that ", ""), ("Note this: ", ""), ("FYI, ", ""), ("", " Please keep that in mind."),
              ("", " Thought you should know."), ("Good news: ", "")),
    "read": (("Quick question: ", ""), ("Hey, ", ""), ("Remind me, ", ""), ("Out of curiosity, ", ""),
             ("One more thing: ", ""), ("", " Thanks!"), ("Sorry to bother you, but ", ""),
             ("", " Thanks in advance.")),
}
YEARS = tuple(str(y) for y in range(2005, 2025))
# fmt: on
