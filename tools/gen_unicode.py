#!/usr/bin/env python3
"""Generates src/unicode_tables.c: compact Unicode range tables for the
byte-level BPE pre-tokenizers (src/tokenizer_bpe.c).

Input: Debian's unicode-data package (apt-get install unicode-data), i.e.
/usr/share/unicode/UnicodeData.txt (general categories) and PropList.txt
(White_Space). The generated file is committed, so the build does not need
the package; rerun this script only to move to a newer Unicode version:

    python3 tools/gen_unicode.py [/usr/share/unicode] > src/unicode_tables.c

Tables:
  wlm_uc_ranges[]  every code point 0..0x10FFFF in runs of one class:
                   entry = (first code point << 4) | class, sorted, so the
                   class of cp is the entry with the largest start <= cp.
                   class = major category (WLM_UC_L/M/N/P/S/Z, 0 = C* and
                   unassigned) | WLM_UC_WS when the code point is White_Space.
  wlm_uc_latin1[]  the same classes for 0..255 (fast path).
  wlm_uc_dsk_letters[]  the explicit letter class of the DeepSeek-LLM
                   pre-tokenizer (a character class written out in its
                   tokenizer.json), as inclusive [lo, hi] pairs.
For the WordPiece (BERT) normalizer (src/tokenizer_wpm.c):
  wlm_uc_lower[]   (code point, simple lowercase mapping) pairs, sorted, for
                   every code point whose mapping differs from itself.
  wlm_uc_nfd_base[] (code point, base) pairs, sorted: the one code point left
                   of the full canonical decomposition (UnicodeData field 5,
                   applied recursively) once its combining marks (category
                   M) are removed, for every code point where that differs
                   from itself (no decomposition keeps two non-marks; Hangul
                   syllables decompose algorithmically and are not listed).
  wlm_uc_mn[]      the nonspacing marks (category Mn), inclusive [lo, hi]
                   pairs: what BERT's accent stripping removes.
"""
import os
import sys

UC_C, UC_L, UC_M, UC_N, UC_P, UC_S, UC_Z = 0, 1, 2, 3, 4, 5, 6
UC_WS = 8
MAJOR = {'C': UC_C, 'L': UC_L, 'M': UC_M, 'N': UC_N, 'P': UC_P, 'S': UC_S, 'Z': UC_Z}

# DeepSeek-LLM's letter class: the character class of the second Split of
# its pre_tokenizer sequence ("\\s?[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]+"), written as hex
# code point ranges because several of its characters (U+1F7D, U+1FBE,
# U+1FD3, U+1FDB, U+2126, U+212A) are not NFC-stable and get rewritten by
# editors that normalize text.
DSK_LETTERS = (
    "41-5a 61-7a b5 c0-d6 d8-f6 f8-1ba 1bc-1bf 1c4-293 295-2af 370-373 "
    "376 377 37b-37d 37f 386 388-38a 38c 38e-3a1 3a3-3f5 3f7-481 "
    "48a-52f 531-556 10a0-10c5 13a0-13f5 13f8-13fd 1c90-1cba 1cbd-1cbf 1d00-1d2b 1d6b-1d77 1d79-1d9a "
    "1e00-1f15 1f18-1f1d 1f20-1f45 1f48-1f4d 1f50-1f57 1f59 1f5b 1f5d 1f5f-1f7d 1f80-1fb4 "
    "1fb6-1fbc 1fbe 1fc2-1fc4 1fc6-1fcc 1fd0-1fd3 1fd6-1fdb 1fe0-1fec 1ff2-1ff4 1ff6-1ffc 2102 "
    "2107 210a-2113 2115 2119-211d 2124 2126 2128 212a-212d 212f-2134 2139 "
    "213c-213f 2145-2149 214e 2183 2184 2c00-2c7b 2c7e-2ce4 2ceb-2cee 2cf2 2cf3 "
    "a640-a66d a680-a69b a722-a76f a771-a787 a78b-a78e ab70-abbf fb00-fb06 fb13-fb17 ff21-ff3a ff41-ff5a "
    "10400-1044f 104b0-104d3 104d8-104fb 10c80-10cb2 10cc0-10cf2 118a0-118df 1e900-1e943"
)


def class_ranges(s):
    out = []
    for r in s.split():
        lo, _, hi = r.partition('-')
        lo = int(lo, 16)
        hi = int(hi, 16) if hi else lo
        assert lo <= hi, r
        out.append((lo, hi))
    out.sort()
    merged = []
    for lo, hi in out:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else '/usr/share/unicode'
    cls = bytearray(0x110000)  # UC_C by default (unassigned)
    cats = {}   # code point -> general category, decomposition, simple lowercase (listed code points)
    mn = bytearray(0x110000)
    first = None
    with open(os.path.join(base, 'UnicodeData.txt'), encoding='utf-8') as f:
        for line in f:
            p = line.split(';')
            cp, name, cat = int(p[0], 16), p[1], p[2]
            c = MAJOR[cat[0]]
            if name.endswith(', First>'):
                first = cp
                continue
            if name.endswith(', Last>'):
                for x in range(first, cp + 1):
                    cls[x] = c
                    mn[x] = cat == 'Mn'
                first = None
                continue
            cls[cp] = c
            mn[cp] = cat == 'Mn'
            cats[cp] = (cat, p[5], p[13])
    version = '?'
    with open(os.path.join(base, 'PropList.txt'), encoding='utf-8') as f:
        for line in f:
            if line.startswith('# PropList-'):
                version = line[len('# PropList-'):].strip().rstrip('.txt')
            line = line.split('#')[0].strip()
            if not line:
                continue
            rng, prop = [x.strip() for x in line.split(';')]
            if prop != 'White_Space':
                continue
            if '..' in rng:
                lo, hi = [int(x, 16) for x in rng.split('..')]
            else:
                lo = hi = int(rng, 16)
            for x in range(lo, hi + 1):
                cls[x] |= UC_WS

    runs = []
    for cp in range(0x110000):
        if not runs or runs[-1][1] != cls[cp]:
            runs.append((cp, cls[cp]))
    dsk = class_ranges(DSK_LETTERS)

    w = sys.stdout.write
    w('/* Generated by tools/gen_unicode.py from Unicode %s (Debian unicode-data:\n' % version)
    w(' * UnicodeData.txt general categories, PropList.txt White_Space). Do not edit. */\n')
    w('#include "unicode_tables.h"\n\n')
    w('const uint32_t wlm_uc_ranges[%d] = {\n' % len(runs))
    for i in range(0, len(runs), 8):
        w('    ' + ' '.join('0x%07x,' % ((s << 4) | c) for s, c in runs[i:i + 8]) + '\n')
    w('};\n')
    w('const uint32_t wlm_uc_n_ranges = %d;\n\n' % len(runs))
    w('const uint8_t wlm_uc_latin1[256] = {\n')
    for i in range(0, 256, 16):
        w('    ' + ' '.join('%d,' % cls[x] for x in range(i, i + 16)) + '\n')
    w('};\n\n')
    w('const uint32_t wlm_uc_dsk_letters[%d] = {\n' % (2 * len(dsk)))
    for i in range(0, len(dsk), 4):
        w('    ' + ' '.join('0x%05x, 0x%05x,' % r for r in dsk[i:i + 4]) + '\n')
    w('};\n')
    w('const uint32_t wlm_uc_n_dsk_letters = %d;\n' % len(dsk))

    lower = sorted((cp, int(v[2], 16)) for cp, v in cats.items() if v[2] and int(v[2], 16) != cp)

    def decompose(cp):
        d = cats.get(cp)
        if not d or not d[1] or d[1].startswith('<'):
            return [cp]
        out = []
        for h in d[1].split():
            out += decompose(int(h, 16))
        return out

    nfd = []
    for cp in sorted(cats):
        base = [x for x in decompose(cp) if not (x in cats and cats[x][0].startswith('M'))]
        assert len(base) <= 1, hex(cp)
        if len(base) == 1 and base[0] != cp:
            nfd.append((cp, base[0]))
    mn_ranges = []
    for cp in range(0x110000):
        if not mn[cp]:
            continue
        if mn_ranges and mn_ranges[-1][1] == cp - 1:
            mn_ranges[-1] = (mn_ranges[-1][0], cp)
        else:
            mn_ranges.append((cp, cp))

    def pairs(name, rows, fmt):
        w('\nconst uint32_t %s[%d] = {\n' % (name, 2 * len(rows)))
        for i in range(0, len(rows), 4):
            w('    ' + ' '.join(fmt % r for r in rows[i:i + 4]) + '\n')
        w('};\n')
        w('const uint32_t %s = %d;\n' % (name.replace('wlm_uc_', 'wlm_uc_n_'), len(rows)))

    pairs('wlm_uc_lower', lower, '0x%05x, 0x%05x,')
    pairs('wlm_uc_nfd_base', nfd, '0x%05x, 0x%05x,')
    pairs('wlm_uc_mn', mn_ranges, '0x%05x, 0x%05x,')


if __name__ == '__main__':
    main()
