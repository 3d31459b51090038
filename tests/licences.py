"""A deterministic licence-like corpus: documents of a few lines, each a project's own text around warranty and
permission paragraphs that many documents share (with the holder's name inside some of them), the way licence
headers repeat across source files that differ everywhere else. Written here, not downloaded."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

NAMES = ("Ada Lindqvist", "Bruno Okafor", "Chen Wei", "Dana Whitfield", "Emil Novak", "Farah Haddad", "Goran Petrov",
         "Hana Sato", "Ines Moreau", "Jonas Berg", "Kavya Rao", "Luis Ortega", "Mira Kowalski", "Nils Eriksen")
BOILERPLATE = (
    "This program is distributed in the hope that it will serve its users well, but it comes WITHOUT ANY WARRANTY; "
    "not even the implied warranty of MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE. Read the General Public "
    "Licence for the details of what is and is not promised.",
    "You should have received a copy of the General Public Licence together with this program; if you did not, "
    "write to the people who publish it and ask them for one, or look for it where the program was found.",
    "THIS SOFTWARE IS PROVIDED BY {holder} AND CONTRIBUTORS \"AS IS\" AND ANY EXPRESS OR IMPLIED WARRANTIES, "
    "INCLUDING BUT NOT LIMITED TO THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE, ARE "
    "DISCLAIMED. IN NO EVENT SHALL {holder} OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, "
    "EXEMPLARY, OR CONSEQUENTIAL DAMAGES HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY.",
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software and the files "
    "that document it, to deal in the software without restriction, including the rights to use, copy, modify, "
    "merge, publish, distribute, sublicense and sell copies of it, subject to the conditions below.",
    "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED "
    "TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE "
    "AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY.",
    "Redistribution and use in source and binary forms, with or without modification, are permitted provided that "
    "the notice above, this list of conditions and the disclaimer below are kept in every copy.",
)
WORDS = ("parser buffer socket window render engine module driver kernel thread queue vector matrix signal filter "
         "stream packet cursor widget layout plugin schema record ledger sensor camera audio codec shader texture "
         "compiler linker loader archive backup mirror cluster replica shard index query cache token session user "
         "account invoice order payment rocket orbit planet garden river forest meadow harbour lantern compass "
         "reads writes builds draws checks sends keeps finds sorts merges splits joins counts lists maps tracks "
         "quickly slowly safely often rarely always gently loudly small large fast quiet bright early late "
         "the a of to in for with on by from and or but that this each every some many").split()


def project_text(rng: random.Random, words: int) -> str:
    """A project's own sentences: words drawn at random, so that no 13 of them in a row recur."""
    sentences, left = [], words
    while left > 0:
        n = min(left, rng.randint(8, 18))
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
        left -= n
    return " ".join(sentences)


def licence_documents(n: int, seed: int = 0) -> list[str]:
    """n paragraphs, hard-wrapped at 72 columns as licence files are: half of them a shared paragraph (most
    verbatim, some with a holder, a year or a clause of their own), half a project's own text, a third of those
    with a shared sentence inside."""
    rng = random.Random(seed)
    docs = []
    for k in range(n):
        holder = rng.choice(NAMES)
        if rng.random() < 0.5:
            text = rng.choice(BOILERPLATE).replace("{holder}", "THE COPYRIGHT HOLDERS")
            if rng.random() < 0.3:
                text = text.replace("THE COPYRIGHT HOLDERS", holder.upper()).replace(
                    "program", rng.choice(("program", "library", "tool"))) + f" Copyright {1990 + k % 35} {holder}."
        else:
            text = f"Project {k} of {holder}: {project_text(rng, rng.randint(25, 90))}"
            if rng.random() < 1 / 3:
                text += " " + rng.choice(BOILERPLATE).replace("{holder}", holder.upper())
        docs.append("\n".join(textwrap.wrap(text, 72)))
    return docs


def write_licence_corpus(path: Path, n: int, seed: int = 0) -> Path:
    """licence_documents as a text file of blank-line separated paragraphs (build it with --doc-sep blank)."""
    path.write_text("\n\n".join(licence_documents(n, seed)) + "\n", encoding="utf-8")
    return path
