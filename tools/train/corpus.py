#!/usr/bin/env python3
"""Text corpus for the synthetic-speech model, from Debian packages (pure Python, no numpy).

Sources (unpacked with `dpkg -x` into ROOT by tools/train/prepare.sh):
  - fortunes (not fortunes-off): a chosen list of prose-like cookie files; attributions dropped;
  - wordnet-base: every gloss of data.{noun,verb,adj,adv}: its definitions and its quoted examples.

Each text is split into sentences and kept only when a synthesizer reads it as written: ASCII
letters and plain punctuation, no digits, no abbreviations or all-capital words (read letter by
letter), 3 to 24 words. Sentences are deduplicated case-insensitively and split into train and
held-out sets by a hash of the normalized text, so the split does not depend on order and a
held-out sentence never appears in training.

  python3 tools/train/corpus.py --root /tmp/textroot --out corpus/
writes corpus/train.txt, corpus/heldout.txt and corpus/stats.json.
"""
import argparse
import hashlib
import json
import os
import re
import sys

# Prose-like cookie files; left out: ascii-art, code and system hints, nonsense (zippy), and the
# files whose humour leans on groups of people.
FORTUNE_FILES = ["wisdom", "literature", "people", "science", "work", "education", "humorists",
                 "platitudes", "miscellaneous", "love", "magic", "pets", "food", "sports", "tao",
                 "paradoxum", "riddles", "fortunes", "goedel", "kids", "law", "medicine", "news",
                 "politics", "pratchett", "art", "computers", "songs-poems"]

# A short stop-list keeps anything crude out even of the inoffensive files.
BLOCK = {"sex", "sexy", "sexual", "damn", "hell", "kill", "killed", "killing", "murder", "drunk",
         "naked", "nude", "breast", "breasts", "penis", "whore", "bastard", "bitch", "god", "gods",
         "jesus", "christ", "satan", "devil", "nigger", "fuck", "shit", "piss", "suicide", "rape",
         "slave", "slaves", "nazi", "hitler", "drugs", "cocaine", "marijuana", "beer", "whiskey",
         # Dated racial terms in WordNet's glosses (added after the third run, which still had
         # about twenty such sentences among its 157,431).
         "negro", "negroes", "negroid", "mulatto", "squaw", "redskin", "coolie"}

ALLOWED = re.compile(r"^[A-Za-z][A-Za-z ,.;:'?!-]*[.?!]$")
ABBREV = re.compile(r"\b(?:[A-Za-z]\.){1,}|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|etc|Inc|Ltd|Co|Mt|Prof)\.|"
                    r"\b[A-Z]{2,}\b|\be\.g\b|\bi\.e\b")
SPLIT = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")


def clean_sentence(s):
    s = s.replace("--", ", ").replace("`", "'").replace('"', "")
    s = re.sub(r"\([^)]*\)", " ", s)
    s = re.sub(r"\s+", " ", s).strip(" ,;:-'")
    s = re.sub(r"\s+([,.;:?!])", r"\1", s)
    s = re.sub(r",+", ",", s)
    if not s:
        return None
    if s[-1] not in ".?!":
        s += "."
    s = s[0].upper() + s[1:]
    if not ALLOWED.match(s) or ABBREV.search(s) or "''" in s or " '" in s or "' " in s:
        return None
    words = s.split()
    if not 3 <= len(words) <= 24 or len(s) > 160:
        return None
    if any(re.sub(r"[^a-z]", "", w.lower()) in BLOCK for w in words):
        return None
    if any(len(re.sub(r"[^A-Za-z]", "", w)) > 18 for w in words):
        return None
    return s


def fortune_texts(root):
    base = os.path.join(root, "usr/share/games/fortunes")
    for name in FORTUNE_FILES:
        path = os.path.join(base, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="latin-1") as f:
            for cookie in f.read().split("\n%\n"):
                lines = [l for l in cookie.split("\n") if not re.match(r"^\s+--", l)]
                text = " ".join(l.strip() for l in lines)
                if not text.isascii():
                    continue
                if re.search(r"[0-9@#$%^&*_=+<>{}\[\]|/\\~]", text):
                    continue
                yield from SPLIT.split(text)


def wordnet_texts(root):
    base = os.path.join(root, "usr/share/wordnet")
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(base, "data." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue
                gloss = line.split("|", 1)[1].strip()
                for part in gloss.split(";"):
                    part = part.strip()
                    if not part or re.search(r"[0-9]", part):
                        continue
                    if part.startswith('"'):
                        yield from SPLIT.split(part.strip('" '))
                    elif len(part.split()) >= 4:
                        yield part


def bucket(sentence):
    key = re.sub(r"[^a-z ]", "", sentence.lower())
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, help="folder the fortunes and wordnet-base .debs are unpacked in")
    ap.add_argument("--out", required=True)
    ap.add_argument("--heldout-per-mille", type=int, default=15)
    args = ap.parse_args()

    seen, train, heldout = set(), [], []
    counts = {"fortunes": 0, "wordnet": 0}
    for source, texts in (("fortunes", fortune_texts(args.root)), ("wordnet", wordnet_texts(args.root))):
        for raw in texts:
            s = clean_sentence(raw)
            if s is None:
                continue
            key = re.sub(r"[^a-z ]", "", s.lower())
            if key in seen:
                continue
            seen.add(key)
            counts[source] += 1
            (heldout if bucket(s) < args.heldout_per_mille else train).append(s)
    if len(train) < 1000:
        sys.exit("corpus.py: only %d sentences; is --root right?" % len(train))
    os.makedirs(args.out, exist_ok=True)
    for name, rows in (("train", train), ("heldout", heldout)):
        with open(os.path.join(args.out, name + ".txt"), "w") as f:
            f.write("\n".join(rows) + "\n")
    stats = {"train": len(train), "heldout": len(heldout), "by_source": counts,
             "words_train": sum(len(s.split()) for s in train)}
    with open(os.path.join(args.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
