"""toy_align: seeded synthetic translation whose word alignments are known exactly.

Two invented languages of lowercase words. A derivation (:class:`Clause`, :class:`NP`) is
drawn from the grammar below, realised in both languages at once, and every target word
remembers the source words it comes from, so each pair gets its gold alignment.

Grammar (source side; ``*`` repeats 0-2 times, ``( )`` is optional)::

    S       → NP V NP (CONJ S')           main clause, subject-verb-object
    S'      → NP V NP (CONJ S')           subordinate clause, at most two levels deep
    NP      → NAME | DET ADJ* N (PP)
    PP      → P NP                        (the inner NP has no PP)

The target realises the same derivation with two local reorderings and two particles:

- adjectives follow the noun, in mirror order: ``ADJ1 ADJ2 N → N' ADJ2' ADJ1'``;
- a subordinate clause is verb-final and ends in the particle ``ne``:
  ``CONJ NP1 V NP2 → CONJ' NP1' NP2' V' ne`` (a nested clause follows the ``ne``);
- the definite article ``ta`` has no target word; the indefinite ``na`` becomes ``un``;
- the target particle ``ne`` has no source word.

Lexicon (:data:`NOUNS`, :data:`VERBS`, ...; source phrase → target phrase): one-to-one
entries (``mabo → kelu``), one-to-many (the noun ``sunadi → ela mira``, the verb
``dormal → fe lasko``), many-to-one (the noun ``ruka pet → skavil``, the phrasal verb
``tapa ri → gulsen``) and names, which are the same word in both languages. Apart from
the names, no word belongs to both languages.

Gold alignment (:mod:`attnmt.data.gold`; Pharaoh, 0-based word indices, source first):
every source word of a lexicon entry has a sure link ``i-j`` to every target word of its
translation (so one-to-many and many-to-one entries give several sure links); ``ta`` has
only possible links ``i?j``, to each target word of its noun; ``ne`` has no link.

Example (a subordinate clause, an unaligned article, a one-to-many verb)::

    boris dormal na tobe ke ta garu halip kemal
    boris fe lasko un famir tes hosen kemal vontra ne
    0-0 1-1 1-2 2-3 3-4 4-5 5?6 6-6 7-8 8-7

Sizes, seed and sentence lengths come from ``data.toy``: ``train``/``valid``/``test``
pairs, ``seed``, and ``min_symbols``..``max_symbols`` words on both sides (3..30 in
configs/data/toy_align.yaml; ``n_symbols`` is not used). Every source sentence is unique
across the splits. The test split is drawn first, then valid, then train, so a change of
``data.toy.train`` leaves valid and test as they were.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path

from attnmt.data.config import DataConfig, ToyConfig
from attnmt.data.gold import Link, format_links
from attnmt.data.recipes.common import Built, Pair
from attnmt.errors import ConfigError

NAMES = ("anja", "boris", "kemal", "liesel", "oskar", "tamiko")
NOUNS = {
    "mabo": "kelu",
    "sirat": "dovan",
    "peluna": "arisk",
    "tobe": "famir",
    "garu": "hosen",
    "lisku": "bramo",
    "nerat": "telisa",
    "fomi": "quorin",
    "dasel": "umbra",
    "kirepo": "vastel",
    "sunadi": "ela mira",  # one-to-many
    "korvat": "bin tasko",
    "melipo": "ela gorun",
    "ruka pet": "skavil",  # many-to-one
    "domo lin": "terpa",
}
ADJECTIVES = {
    "bela": "isko",
    "runi": "tavo",
    "gelim": "parsi",
    "osta": "lunde",
    "fikar": "medro",
    "zuli": "ankor",
}
VERBS = {
    "vidar": "somel",
    "tulin": "praka",
    "mesko": "deru",
    "halip": "vontra",
    "sorim": "kelpa",
    "nabu": "ristel",
    "dormal": "fe lasko",  # one-to-many
    "kintu": "fe moren",
    "tapa ri": "gulsen",  # many-to-one
    "pesu ri": "wandol",
}
PREPOSITIONS = {"en": "po", "kon": "sal", "sur": "dim"}
CONJUNCTIONS = {"ke": "tes", "poru": "vilan", "ilsa": "orsen"}
DETERMINERS = {"ta": "", "na": "un"}  # ta: no target word
PARTICLE = "ne"  # ends a target subordinate clause; no source word

MAX_DEPTH = 2  # subordinate clauses inside the main clause
P_NAME = 0.3  # an NP is a name
P_PP = 0.25  # a (non-PP) NP has a PP
P_SUB = 0.45  # a clause has a subordinate clause (below MAX_DEPTH)
ADJ_WEIGHTS = (5, 3, 2)  # 0, 1 or 2 adjectives
SHORTEST = 3  # words of the shortest sentence (NAME V NAME)


@dataclass(frozen=True)
class NP:
    """A noun phrase: ``noun`` a key of NOUNS or a name; ``det`` a key of DETERMINERS
    (None for a name); ``adjs`` keys of ADJECTIVES; ``pp`` (preposition, its NP)."""

    noun: str
    det: str | None = None
    adjs: tuple[str, ...] = ()
    pp: tuple[str, NP] | None = None


@dataclass(frozen=True)
class Clause:
    """A clause: subject, verb (a key of VERBS), object, and optionally
    (conjunction, subordinate clause)."""

    subj: NP
    verb: str
    obj: NP
    sub: tuple[str, Clause] | None = None


@dataclass(eq=False)
class Unit:
    """One lexicon entry as used in a sentence: its source and target words (either may
    be empty) and, for a word without a counterpart, the unit its possible links go to."""

    src: tuple[str, ...]
    tgt: tuple[str, ...]
    possible: Unit | None = None


@dataclass(frozen=True)
class Example:
    """A realised derivation: source and target sentence, and its Pharaoh gold line."""

    src: str
    tgt: str
    gold: str


def _unit(source: str, target: str) -> Unit:
    return Unit(tuple(source.split()), tuple(target.split()))


def np_units(np: NP) -> tuple[list[Unit], list[Unit]]:
    """(source-order units, target-order units) of a noun phrase."""
    if np.noun in NAMES:
        name = _unit(np.noun, np.noun)
        return [name], [name]
    noun = _unit(np.noun, NOUNS[np.noun])
    adjs = [_unit(a, ADJECTIVES[a]) for a in np.adjs]
    src, tgt = [*adjs, noun], [noun, *adjs[::-1]]
    if np.det is not None:
        det = _unit(np.det, DETERMINERS[np.det])
        src.insert(0, det)
        if det.tgt:
            tgt.insert(0, det)
        else:
            det.possible = noun
    if np.pp is not None:
        prep = _unit(np.pp[0], PREPOSITIONS[np.pp[0]])
        inner_src, inner_tgt = np_units(np.pp[1])
        src += [prep, *inner_src]
        tgt += [prep, *inner_tgt]
    return src, tgt


def clause_units(clause: Clause, verb_final: bool = False) -> tuple[list[Unit], list[Unit]]:
    """(source-order units, target-order units) of a clause; ``verb_final`` for a
    subordinate clause (the verb after the object, then the particle)."""
    subj_src, subj_tgt = np_units(clause.subj)
    obj_src, obj_tgt = np_units(clause.obj)
    verb = _unit(clause.verb, VERBS[clause.verb])
    src = [*subj_src, verb, *obj_src]
    if verb_final:
        tgt = [*subj_tgt, *obj_tgt, verb, _unit("", PARTICLE)]
    else:
        tgt = [*subj_tgt, verb, *obj_tgt]
    if clause.sub is not None:
        conj = _unit(clause.sub[0], CONJUNCTIONS[clause.sub[0]])
        inner_src, inner_tgt = clause_units(clause.sub[1], verb_final=True)
        src += [conj, *inner_src]
        tgt += [conj, *inner_tgt]
    return src, tgt


def _positions(units: list[Unit], side: str) -> dict[Unit, range]:
    """Each unit's word positions in the sentence its ``side`` words make."""
    out: dict[Unit, range] = {}
    start = 0
    for unit in units:
        words = getattr(unit, side)
        out[unit] = range(start, start + len(words))
        start += len(words)
    return out


def realise(clause: Clause) -> Example:
    """Both sentences of a derivation and its gold links (sure within a lexicon entry,
    possible from an article to its noun)."""
    src_units, tgt_units = clause_units(clause)
    src_at, tgt_at = _positions(src_units, "src"), _positions(tgt_units, "tgt")
    sure: list[Link] = []
    possible: list[Link] = []
    for unit in src_units:
        target = tgt_at.get(unit, range(0))
        sure += [(i, j) for i in src_at[unit] for j in target]
        if unit.possible is not None:
            possible += [(i, j) for i in src_at[unit] for j in tgt_at[unit.possible]]
    return Example(
        " ".join(w for u in src_units for w in u.src),
        " ".join(w for u in tgt_units for w in u.tgt),
        format_links(sure, possible),
    )


def sample_np(rng: random.Random, in_pp: bool = False) -> NP:
    """A random noun phrase (one without a PP inside a PP)."""
    if rng.random() < P_NAME:
        return NP(rng.choice(NAMES))
    det = rng.choice(sorted(DETERMINERS))
    n_adjs = rng.choices(range(len(ADJ_WEIGHTS)), weights=ADJ_WEIGHTS)[0]
    adjs = tuple(rng.sample(sorted(ADJECTIVES), n_adjs))
    noun = rng.choice(sorted(NOUNS))
    pp = None
    if not in_pp and rng.random() < P_PP:
        pp = (rng.choice(sorted(PREPOSITIONS)), sample_np(rng, in_pp=True))
    return NP(noun, det, adjs, pp)


def sample_clause(rng: random.Random, depth: int = 0) -> Clause:
    """A random clause with at most ``MAX_DEPTH - depth`` levels of subordinate clauses."""
    subj = sample_np(rng)
    verb = rng.choice(sorted(VERBS))
    obj = sample_np(rng)
    sub = None
    if depth < MAX_DEPTH and rng.random() < P_SUB:
        sub = (rng.choice(sorted(CONJUNCTIONS)), sample_clause(rng, depth + 1))
    return Clause(subj, verb, obj, sub)


def _fits(example: Example, toy: ToyConfig) -> bool:
    """Both sides have min_symbols..max_symbols words."""
    lengths = (len(example.src.split()), len(example.tgt.split()))
    return all(toy.min_symbols <= n <= toy.max_symbols for n in lengths)


def generate(toy: ToyConfig) -> dict[str, list[Example]]:
    """Split name -> examples, deterministic in ``toy.seed``; sources unique across splits."""
    if toy.max_symbols < SHORTEST:
        raise ConfigError(
            f"data.toy.max_symbols={toy.max_symbols}: toy_align's shortest sentence has "
            f"{SHORTEST} words; set data.toy.max_symbols >= {SHORTEST}"
        )
    total = toy.train + toy.valid + toy.test
    rng = random.Random(toy.seed)
    seen: set[str] = set()
    out: dict[str, list[Example]] = {}
    attempts = 0
    for name in ("test", "valid", "train"):
        examples: list[Example] = []
        while len(examples) < getattr(toy, name):
            attempts += 1
            if attempts > 200 * total:
                raise ConfigError(
                    f"data.toy: could not draw {total} distinct toy_align sentences of "
                    f"{toy.min_symbols}..{toy.max_symbols} words; widen data.toy.min_symbols"
                    f"..data.toy.max_symbols or ask for fewer pairs"
                )
            example = realise(sample_clause(rng))
            if example.src in seen or not _fits(example, toy):
                continue
            seen.add(example.src)
            examples.append(example)
        out[name] = examples
    return {name: out[name] for name in ("train", "valid", "test")}


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """Generate toy_align from data.toy: pairs and their gold alignments per split."""
    examples = generate(cfg.toy)
    splits: dict[str, list[Pair]] = {
        name: [(e.src, e.tgt) for e in items] for name, items in examples.items()
    }
    gold = {name: [e.gold for e in items] for name, items in examples.items()}
    return Built(splits, gold=gold)
